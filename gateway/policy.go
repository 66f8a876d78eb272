package gateway

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Policy by the sandbox's own template (#21). Once a sandbox exists, every
// decision about it — public or not, limits, max_body, host_header, cold
// start, idle — reads the template it was made from, which the manager's
// record holds from the instance's own labels. The route's template (a
// configured route's, else default_template) and a token's "tpl" claim only
// choose the template of a sandbox not made yet; a claim naming another
// template than an existing sandbox's is ignored (docs/auth.md).
//
// public means "reachable without a token", never "anyone may create": a
// sandbox the manager does not know is never public, and a request without
// a token may wake an existing public sandbox but never creates one
// (sandboxmgr.Options.NoCreate). The manager checks the instance's own
// template once more before it serves or wakes it (Options.MayServe), so a
// record that went stale between the decision and the wake cannot open a
// private sandbox.

// tokenless says how a request without a token got in, if it did.
type tokenless int

const (
	withToken     tokenless = iota // it has a token
	publicNoToken                  // the sandbox (or route) is public
	viaShareLink                   // a share link (links.go)
)

// errNotPublic: a request without a token reached a sandbox whose own
// template is not public.
var errNotPublic = errors.New("sandbox is not public")

// anonymousOptions restrict a wake for a request without a token: no
// create, and only a sandbox that is public by its own settings or
// template (or route), or that a share link opened (the link's record
// exists only for an existing sandbox, checked just before). The
// instance's template is checked again once the wake is done: the
// decision's snapshot answers for the instance it saw ready; any other
// (a wake, a replaced instance) re-reads the sandbox's settings.
func (g *Gateway) anonymousOptions(opts sandboxmgr.Options, d *decision) sandboxmgr.Options {
	opts.NoCreate = true
	if d.by == viaShareLink {
		return opts
	}
	t, rt, h := d.t, d.rt, d.h
	seen, known, ownPublic := d.ready, d.known, d.ownPublic
	seenTemplate := d.template
	opts.MayServe = func(template string) error {
		switch {
		case rt.public:
			return nil
		case seen && known && template == seenTemplate:
			if ownPublic {
				return nil
			}
		default:
			if s := h.Snapshot(); publicBy(t.cfg.Templates[template], s.Settings, s.Fresh) {
				return nil
			}
		}
		return errNotPublic
	}
	return opts
}

// createNeedsToken says why a request without a token for a sandbox that
// does not exist under a public template was refused (nil otherwise: the
// usual 401 applies). A private sandbox that exists under a public route
// template gets the very same answer: an anonymous client must not tell
// which private sandboxes exist by the answer's code or text.
func createNeedsToken(rt route, pol policy, err error) *httpError {
	if pol.public || !errors.Is(err, auth.ErrMissing) {
		return nil
	}
	switch {
	case !pol.exists && pol.tpl != nil && pol.tpl.Public,
		pol.exists && rt.template != nil && rt.template.Public:
		return anonymousError(fmt.Errorf("%w: %w", runtime.ErrNotFound, err))
	}
	return nil
}

// anonymousError maps what anonymousOptions refused to an answer.
func anonymousError(err error) *httpError {
	switch {
	case errors.Is(err, errNotPublic):
		return &httpError{Status: http.StatusUnauthorized, Code: "unauthorized", Err: err,
			Msg: "This preview needs an access token (missing). Open it again from the app that created it."}
	case errors.Is(err, runtime.ErrNotFound):
		return &httpError{Status: http.StatusUnauthorized, Code: "no_sandbox", Err: err,
			Msg: "This preview does not exist yet or is not public: creating or opening it takes an access token. Open it from the app that creates it."}
	}
	return nil
}

// holdsToken reports whether r holds a token of its sandbox. Only then
// may it see the app's output (the last lines the container printed:
// another client's request, a secret the app logs): a share link or
// public access opens the app's pages, not its console, so the waiting
// page shows such a visitor the wake's phases only, and an error page no
// output. On a public sandbox a request is let in without its token being
// looked at (decide); a valid one counts here.
func (g *Gateway) holdsToken(r *http.Request, d *decision) bool {
	return holdsToken(r, d.by, d.t.verifier, d.rt.sandbox)
}

// holdsToken is Gateway.holdsToken for a request let in by by, to sandbox
// under v.
func holdsToken(r *http.Request, by tokenless, v *auth.Verifier, sandbox string) bool {
	switch by {
	case withToken:
		return true
	case publicNoToken:
		_, err := v.Check(r, sandbox)
		return err == nil
	}
	return false
}
