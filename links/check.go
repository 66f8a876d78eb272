package links

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/previewgate/previewgate/auth"
)

// Records is where the request path reads a sandbox's links (package
// records implements it).
type Records interface {
	// Links are id's links as this replica holds them (no store call),
	// and whether that copy is recent enough to grant access on.
	Links(id string) ([]Link, bool)
	// RefreshLinks starts a reload of them from the store, at most one a
	// second per sandbox, and returns at once: the request that asked is
	// answered from the copy it has, a later one sees what was read.
	RefreshLinks(ctx context.Context, id string)
}

// Why a link was refused (besides auth.ErrOrigin, for an upgrade from
// another origin).
var (
	ErrInvalid = errors.New("share link not valid")
	// ErrUnknown: no kept link has this token's id, as this replica knows
	// them. It may be made up, or minted on another replica a moment ago:
	// the reload it started finds it within a second or so, so the answer
	// says to try again (for a browser, a page that does so by itself).
	// It is also ErrInvalid.
	ErrUnknown     = fmt.Errorf("%w, or not seen here yet", ErrInvalid)
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

// Check checks link token tok for request r to tg; it returns the kept
// link that opens it (its ID and Expires: what the grant is), or why it
// does not open tg.
func Check(r *http.Request, v *auth.Verifier, recs Records, tg Target, tok string) (Link, error) {
	id, claimed, ok := parse(tok)
	if !ok {
		return Link{}, ErrInvalid
	}
	now := time.Now()
	if tg.Sandbox == "" {
		// Answered as an unknown link of an existing sandbox is (promise 2).
		if !claimed.After(now) {
			return Link{}, ErrExpired
		}
		return Link{}, ErrUnknown
	}
	ls, fresh := recs.Links(tg.Sandbox)
	l, found := find(ls, id)
	if (!found || !fresh) && claimed.After(now) {
		// Read again for the next request; this one is answered from the
		// copy at hand, at once (promise 2: no wait tells the sandbox
		// exists, and a made-up link holds nobody).
		recs.RefreshLinks(r.Context(), tg.Sandbox)
	}
	switch {
	case !fresh && claimed.After(now):
		// Revoked on another replica, maybe: grant nothing on an old copy.
		return Link{}, ErrUnavailable
	case found && !matches(tok, l.Digest):
		return Link{}, ErrInvalid
	case found && !l.Revoked.IsZero():
		return Link{}, ErrRevoked
	case found && !l.Expires.After(now), !found && !claimed.After(now):
		// An expired link is pruned from the record at its next change;
		// its token still says when it ended.
		return Link{}, ErrExpired
	case !found:
		return Link{}, ErrUnknown
	}
	if l.Port != tg.Port || !RequestWithin(r.URL, l.Path) && !tg.AnyPath {
		return Link{}, ErrScope
	}
	if tg.Upgrade && l.Path != "/" && !onlyWebSocket(r) {
		return Link{}, ErrScope // promise 5
	}
	if tg.Upgrade && !v.OriginAllowed(r) {
		return Link{}, fmt.Errorf("%w: share link cookie", auth.ErrOrigin)
	}
	return l, nil
}

// Grant is Check for the link in r's query (fromQuery), else for each
// link cookie r carries, the first that opens tg winning (a cookie tossed
// by another sandbox's page: without TLS the cookie has no __Host-
// prefix, so a page of another sandbox can set one of that name for the
// whole domain, and it must not shadow the user's own); if none does, the
// first refusal that is not ErrInvalid, else the first.
func Grant(r *http.Request, v *auth.Verifier, recs Records, tg Target, tok string, fromQuery bool) (Link, error) {
	l, first := Check(r, v, recs, tg, tok)
	if first == nil || fromQuery {
		return l, first
	}
	best := first
	for _, c := range auth.Cookies(nil, r, v.LinkCookieName()) {
		if c == tok {
			continue
		}
		l, err := Check(r, v, recs, tg, c)
		if err == nil {
			return l, nil
		}
		if errors.Is(best, ErrInvalid) {
			best = err
		}
	}
	return Link{}, best
}

// Holds reports whether the link lid that opened a request to sandbox
// still grants it at now, by this replica's copy of the records (no store
// call: it is asked again and again while a stream the link opened stays
// open): nil, or ErrRevoked, ErrExpired, ErrUnavailable (the copy is
// stale: a revoke on another replica may be missing from it) or
// ErrInvalid (the link is gone from the record: the sandbox was removed,
// or made anew under its id).
func Holds(recs Records, sandbox, lid string, now time.Time) error {
	ls, fresh := recs.Links(sandbox)
	l, found := find(ls, lid)
	switch {
	case found && !l.Revoked.IsZero():
		return ErrRevoked
	case found && !l.Expires.After(now):
		return ErrExpired
	case !fresh:
		return ErrUnavailable
	case !found:
		return ErrInvalid
	}
	return nil
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

func find(ls []Link, id string) (Link, bool) {
	for _, l := range ls {
		if l.ID == id {
			return l, true
		}
	}
	return Link{}, false
}
