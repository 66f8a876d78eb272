package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// Share links at the gateway (#23). A link (auth/links.go) opens one
// existing sandbox, on one port, under one path prefix, until it expires
// or is revoked; its record is the sandbox's settings (sandboxmgr
// settings.go), read from this replica's cache, which every re-check
// reloads from the runtime: a revoke on any replica is seen here within
// the manager's RecheckEvery (5 s) plus one list call, and after a
// restart. A link minted on another replica moments ago is not cached
// yet: for a known sandbox the record is reloaded on demand, at most once
// a second per sandbox (RefreshSettings), so an unknown link costs an
// attacker one runtime call a second per existing sandbox at most, and
// nothing for a sandbox that does not exist. If this replica's copy is
// stale (the runtime's list kept failing: sandboxmgr FreshSettings), a
// link is reloaded, and answers 503 link_unavailable if that fails too.
//
// path is a prefix restriction (segment boundary: /docs holds /docs/a,
// not /docsx), and the link opens there. A dev server loading assets from
// the root (/@vite/, /_next/) needs a link for "/" (docs/links.md).
//
// A link never creates a sandbox; it may wake a stopped one, like a
// token. Its failures answer a page (JSON for API clients) that says what
// happened: 410 link_expired or link_revoked, 403 link_scope (another
// port or path), 401 link_invalid; 403 forbidden for an upgrade (a
// WebSocket) from another origin than the preview's own or an allowed one,
// as for a token cookie (auth Check).

var errLink = errors.New("share link refused")

// linkAccess checks link token tok for route rt (whose own template is
// pol.tpl); it returns the link's expiry, or the answer to give.
func (g *Gateway) linkAccess(r *http.Request, v *auth.Verifier, rt route, pol policy, tok string) (time.Time, *httpError) {
	id, claimed, ok := auth.ParseLink(tok)
	if !ok {
		return time.Time{}, linkInvalid()
	}
	now := time.Now()
	if rt.sandbox == "" || rt.upstream != nil || !pol.exists || pol.tpl == nil {
		// Answered as an unknown link of an existing sandbox is: a
		// made-up link must not tell whether a sandbox exists.
		if !claimed.After(now) {
			return time.Time{}, linkExpired()
		}
		return time.Time{}, linkInvalid()
	}
	s, fresh := g.sb.FreshSettings(rt.sandbox)
	l, found := findLink(s.Links, id)
	if (!found || !fresh) && claimed.After(now) {
		s, fresh = g.sb.RefreshSettings(r.Context(), rt.sandbox)
		l, found = findLink(s.Links, id)
	}
	switch {
	case !fresh && claimed.After(now):
		// Revoked on another replica, maybe: grant nothing on an old copy.
		return time.Time{}, &httpError{Status: http.StatusServiceUnavailable, Code: "link_unavailable", Err: errLink,
			Msg: "This share link cannot be checked right now. Try again in a minute."}
	case found && !auth.LinkMatches(tok, l.Digest):
		return time.Time{}, linkInvalid()
	case found && !l.Revoked.IsZero():
		return time.Time{}, &httpError{Status: http.StatusGone, Code: "link_revoked", Err: errLink,
			Msg: "This share link was revoked. Ask whoever shared it for a new one."}
	case found && !l.Expires.After(now), !found && !claimed.After(now):
		// An expired link is pruned from the record at its next change;
		// its token still says when it ended.
		return time.Time{}, linkExpired()
	case !found:
		return time.Time{}, linkInvalid()
	}
	port := rt.port
	if port == 0 {
		port = pol.tpl.Port
	}
	// The waiting page's own status stream is the gateway's, under no
	// app path: a link that may wake the sandbox may follow its wake.
	if l.Port != port || !auth.RequestWithin(r.URL, l.Path) && !isStatusRequest(r) {
		return time.Time{}, &httpError{Status: http.StatusForbidden, Code: "link_scope", Err: errLink,
			Msg: "This share link does not open this address: it is for another port or path of the preview."}
	}
	if isUpgrade(r) && !v.OriginAllowed(r) {
		return time.Time{}, authError(fmt.Errorf("%w: share link cookie", auth.ErrOrigin))
	}
	return l.Expires, nil
}

// linkGrant is linkAccess for the link in r's query (fromQuery), else for
// each link cookie r carries, the first that opens rt winning (a cookie
// tossed by another sandbox's page, auth LinkCookies); if none does, the
// first answer that is not link_invalid, else the first.
func (g *Gateway) linkGrant(r *http.Request, v *auth.Verifier, rt route, pol policy, tok string, fromQuery bool) (time.Time, *httpError) {
	exp, first := g.linkAccess(r, v, rt, pol, tok)
	if first == nil || fromQuery {
		return exp, first
	}
	best := first
	for _, c := range v.LinkCookies(r) {
		if c == tok {
			continue
		}
		exp, he := g.linkAccess(r, v, rt, pol, c)
		if he == nil {
			return exp, nil
		}
		if best.Code == "link_invalid" {
			best = he
		}
	}
	return time.Time{}, best
}

func linkExpired() *httpError {
	return &httpError{Status: http.StatusGone, Code: "link_expired", Err: errLink,
		Msg: "This share link has expired. Ask whoever shared it for a new one."}
}

func linkInvalid() *httpError {
	return &httpError{Status: http.StatusUnauthorized, Code: "link_invalid", Err: errLink,
		Msg: "This share link is not valid. Ask whoever shared it for a new one."}
}

func findLink(ls []sandboxmgr.Link, id string) (sandboxmgr.Link, bool) {
	for _, l := range ls {
		if l.ID == id {
			return l, true
		}
	}
	return sandboxmgr.Link{}, false
}
