package gateway

import (
	"errors"
	"net/http"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/links"
)

// Share links at the gateway (#23). Package links decides whether a link
// opens a request (its record, the record's freshness, its port and
// path); the gateway says what the link is checked against and what the
// user is told (linkError: a page, or JSON for API clients). A link never
// creates a sandbox; it may wake a stopped one, like a token (policy.go).

// linkGrant checks the share link tok, from r's query (fromQuery) or else
// r's link cookies (links.Grant), for route rt whose own template is
// pol.tpl; it returns the kept link that opens r (its ID and expiry), or
// the answer to give.
func (g *Gateway) linkGrant(r *http.Request, v *auth.Verifier, rt route, pol policy, tok string, fromQuery bool) (links.Link, *httpError) {
	tg := links.Target{Port: rt.port, AnyPath: isStatusRequest(r), Upgrade: isUpgrade(r)}
	if rt.sandbox != "" && rt.upstream == nil && pol.exists && pol.tpl != nil {
		tg.Sandbox = rt.sandbox
		if tg.Port == 0 {
			tg.Port = pol.tpl.Port
		}
	}
	l, err := links.Grant(r, v, g.recs, tg, tok, fromQuery)
	if err != nil {
		return links.Link{}, linkError(err)
	}
	return l, nil
}

// linkError is the answer to a link links.Grant refused; an upgrade from
// a foreign origin is refused as for a token cookie (auth.ErrOrigin).
func linkError(err error) *httpError {
	switch {
	case errors.Is(err, auth.ErrOrigin):
		return authError(err)
	case errors.Is(err, links.ErrUnavailable):
		return &httpError{Status: http.StatusServiceUnavailable, Code: "link_unavailable", Err: err,
			Msg: "This share link cannot be checked right now. Try again in a minute."}
	case errors.Is(err, links.ErrRevoked):
		return &httpError{Status: http.StatusGone, Code: "link_revoked", Err: err,
			Msg: "This share link was revoked. Ask whoever shared it for a new one."}
	case errors.Is(err, links.ErrExpired):
		return &httpError{Status: http.StatusGone, Code: "link_expired", Err: err,
			Msg: "This share link has expired. Ask whoever shared it for a new one."}
	case errors.Is(err, links.ErrUnknown):
		// Made up, or minted on another replica a moment ago: the same
		// answer either way, and whether the sandbox exists or not.
		return &httpError{Status: http.StatusUnauthorized, Code: "link_invalid", Err: err, RetryAfter: 1, Reload: true,
			Msg: "This share link is not valid, or it was made a moment ago and is not known here yet: trying again for a few seconds."}
	case errors.Is(err, links.ErrScope):
		return &httpError{Status: http.StatusForbidden, Code: "link_scope", Err: err,
			Msg: "This share link does not open this address: it is for another port or path of the preview."}
	}
	return &httpError{Status: http.StatusUnauthorized, Code: "link_invalid", Err: err,
		Msg: "This share link is not valid. Ask whoever shared it for a new one."}
}
