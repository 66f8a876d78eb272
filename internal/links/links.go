// Package links decides whether a share link opens a request (#23). A
// link (auth/links.go mints and parses it) opens one existing sandbox, on
// one port, under one path prefix, until it expires or is revoked; its
// record is the sandbox's settings (package records), read from
// this replica's cache, which every re-check reloads from the runtime: a
// revoke on any replica is seen here within the manager's RecheckEvery
// (5 s) plus one list call, and after a restart. A link minted on another
// replica moments ago is not cached yet: for a known sandbox the record
// is reloaded on demand, at most once a second per sandbox
// (Records.RefreshSettings), so an unknown link costs an attacker one
// runtime call a second per existing sandbox at most, and nothing for a
// sandbox that does not exist. If this replica's copy is stale (the
// runtime's list kept failing: sandboxmgr FreshSettings), a link is
// reloaded, and refused with ErrUnavailable if that fails too.
//
// path is a prefix restriction (segment boundary: /docs holds /docs/a,
// not /docsx), and the link opens there. A dev server loading assets from
// the root (/@vite/, /_next/) needs a link for "/" (docs/links.md).
//
// Its promises, tested in links_test.go and end to end by the gateway's
// links_*_test.go:
//
//  1. Access is granted only on a kept record: the token's digest, port,
//     path and expiry match, and the record is not revoked. The expiry in
//     the token only chooses what an unknown link's refusal says.
//  2. A made-up link does not tell whether a sandbox exists: for a sandbox
//     that does not exist (Target.Sandbox "") it gets the answer an
//     unknown link of an existing sandbox gets, without a runtime call.
//  3. Nothing is granted on a copy of the records this replica could not
//     refresh lately (ErrUnavailable): a revoke on another replica holds.
//  4. An upgrade (a WebSocket) opened by a link must come from the
//     preview's own origin or an allowed one, as for a token cookie
//     (auth.ErrOrigin).
//  5. A link for a path below "/" opens only a WebSocket upgrade: a
//     switch to another protocol (h2c, a raw stream) would carry requests
//     for any path on one connection, outside the link's scope (ErrScope).
//
// It decides no status or message, and never creates or wakes a sandbox:
// the gateway does (gateway/links.go).
package links

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/records"
)

// Records is where a sandbox's links are read; *records.Records
// implements it.
type Records interface {
	// Settings are id's settings as this replica knows them (no
	// runtime call), and whether that copy is recent enough to grant
	// access on.
	Settings(id string) (records.Settings, bool)
	// Refresh reloads them, at most once a second per sandbox.
	Refresh(ctx context.Context, id string) (records.Settings, bool)
}

var _ Records = (*records.Records)(nil)

// Why a link was refused (besides auth.ErrOrigin, for an upgrade from
// another origin).
var (
	ErrInvalid     = errors.New("share link not valid")
	ErrExpired     = errors.New("share link expired")
	ErrRevoked     = errors.New("share link revoked")
	ErrScope       = errors.New("share link for another port or path")
	ErrUnavailable = errors.New("share link records not fresh")
)

// Target is what a request addresses, as a link check needs it.
type Target struct {
	// Sandbox is the existing sandbox the request is for; "" for anything
	// else (a fixed upstream, a sandbox the manager does not know or whose
	// template is gone), which no link opens.
	Sandbox string
	// Port is the port addressed: the host's, else the template's.
	Port int
	// AnyPath: the gateway's own status stream, under no app path; a link
	// that may wake the sandbox may follow its wake.
	AnyPath bool
	// Upgrade: a protocol upgrade (WebSocket), whose Origin must be
	// allowed.
	Upgrade bool
}

// Check checks link token tok for request r to tg; it returns the link's
// expiry, or why it does not open tg.
func Check(r *http.Request, v *auth.Verifier, recs Records, tg Target, tok string) (time.Time, error) {
	id, claimed, ok := auth.ParseLink(tok)
	if !ok {
		return time.Time{}, ErrInvalid
	}
	now := time.Now()
	if tg.Sandbox == "" {
		// Answered as an unknown link of an existing sandbox is (promise 2).
		if !claimed.After(now) {
			return time.Time{}, ErrExpired
		}
		return time.Time{}, ErrInvalid
	}
	s, fresh := recs.Settings(tg.Sandbox)
	l, found := find(s.Links, id)
	if (!found || !fresh) && claimed.After(now) {
		s, fresh = recs.Refresh(r.Context(), tg.Sandbox)
		l, found = find(s.Links, id)
	}
	switch {
	case !fresh && claimed.After(now):
		// Revoked on another replica, maybe: grant nothing on an old copy.
		return time.Time{}, ErrUnavailable
	case found && !auth.LinkMatches(tok, l.Digest):
		return time.Time{}, ErrInvalid
	case found && !l.Revoked.IsZero():
		return time.Time{}, ErrRevoked
	case found && !l.Expires.After(now), !found && !claimed.After(now):
		// An expired link is pruned from the record at its next change;
		// its token still says when it ended.
		return time.Time{}, ErrExpired
	case !found:
		return time.Time{}, ErrInvalid
	}
	if l.Port != tg.Port || !auth.RequestWithin(r.URL, l.Path) && !tg.AnyPath {
		return time.Time{}, ErrScope
	}
	if tg.Upgrade && l.Path != "/" && !onlyWebSocket(r) {
		return time.Time{}, ErrScope // promise 5
	}
	if tg.Upgrade && !v.OriginAllowed(r) {
		return time.Time{}, fmt.Errorf("%w: share link cookie", auth.ErrOrigin)
	}
	return l.Expires, nil
}

// Grant is Check for the link in r's query (fromQuery), else for each
// link cookie r carries, the first that opens tg winning (a cookie tossed
// by another sandbox's page, auth LinkCookies); if none does, the first
// refusal that is not ErrInvalid, else the first.
func Grant(r *http.Request, v *auth.Verifier, recs Records, tg Target, tok string, fromQuery bool) (time.Time, error) {
	exp, first := Check(r, v, recs, tg, tok)
	if first == nil || fromQuery {
		return exp, first
	}
	best := first
	for _, c := range v.LinkCookies(r) {
		if c == tok {
			continue
		}
		exp, err := Check(r, v, recs, tg, c)
		if err == nil {
			return exp, nil
		}
		if errors.Is(best, ErrInvalid) {
			best = err
		}
	}
	return time.Time{}, best
}

// onlyWebSocket reports whether r asks to switch to WebSocket and to no
// other protocol (an HTTP/2 extended CONNECT for websocket included).
func onlyWebSocket(r *http.Request) bool {
	if r.Method == http.MethodConnect {
		return strings.EqualFold(r.Header.Get(":protocol"), "websocket")
	}
	up := r.Header["Upgrade"]
	return len(up) == 1 && strings.EqualFold(strings.TrimSpace(up[0]), "websocket")
}

func find(ls []links.Link, id string) (links.Link, bool) {
	for _, l := range ls {
		if l.ID == id {
			return l, true
		}
	}
	return links.Link{}, false
}
