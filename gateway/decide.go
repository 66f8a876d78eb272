package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// One decision per request. decide reads the config table once and the
// sandbox once (its handle's Snapshot: record, settings, endpoint, all
// from memory) and returns everything the request path then carries out:
// where the request goes, under which template, who is asking and how
// they got in, or the answer that ends it. ServeHTTP calls it; admit,
// ensure and proxy read the decision and decide nothing again, and
// act on the sandbox through the handle decide took: a warm request asks
// the manager three times (Snapshot, Ensure, then Touch at its end or
// Hold while a stream is open; TestWarmRequestManagerCalls counts them).
//
// Order matters (the README's request path): the host, then the access
// check, and only then the limits and the wake. decide makes no runtime
// call and wakes nothing; the share-link check may reload one sandbox's
// record (links.go), at most once a second.

// decision is what decide found for one request. It lives in the
// request's state (one allocation per request), so it keeps only what
// the stages after decide read.
type decision struct {
	t     *table
	rt    route
	tpl   *config.Template // governs: the sandbox's own template once it exists, else the one to create it from; nil: none
	by    tokenless        // how a request without a token got in, if it did
	sub   string           // the token's subject; "" without a token
	link  string           // by viaShareLink: the link's ID (the stream's grant, grants.go)
	label string           // the metrics label: the template's name, "upstream" or "none"
	// h is the sandbox's handle (nil for upstream routes and refusals
	// before the host resolved): ensure, wake, touch and hold act on it.
	h sandboxmgr.Handle
	// What its snapshot said (zero for upstream routes): ready, and for a
	// sandbox the manager knows, its own template and whether that
	// template and its settings make it public (anonymousOptions).
	ready, known, ownPublic bool
	template                string
	// end is the answer that ends the request; nil: admit, ensure, proxy.
	end *ending
}

// ending is how decide ended a request: a refusal, or a redirect to the
// clean URL that sets a token's or a share link's cookie.
type ending struct {
	answer     answer
	err        *httpError  // refuse
	authFailed string      // refuse by the access check: the metrics reason
	res        auth.Result // exchangeToken
	link       string      // exchangeLink: the link, until linkExp
	linkExp    time.Time
}

// answer is how decide ended a request.
type answer uint8

const (
	refuse        answer = iota // err
	exchangeToken               // redirect, setting the token's cookie
	exchangeLink                // redirect, setting the link's cookie
)

// refused ends d with e.
func (d *decision) refused(e *httpError, authFailed string) {
	d.end = &ending{answer: refuse, err: e, authFailed: authFailed}
}

// policy is what governs one request to a route.
type policy struct {
	tpl    *config.Template // whose settings apply; nil: none to create the sandbox from
	exists bool             // the manager knows the sandbox, and tpl is its own (if still configured)
	public bool             // no token needed
	// ownPublic: public by the sandbox's own settings or template, the
	// route aside (anonymousOptions re-checks it).
	ownPublic bool
}

// policyOf returns the policy for rt under table t, with snap the
// snapshot of rt's sandbox (zero for an upstream route).
func policyOf(t *table, rt route, snap *sandboxmgr.Snapshot) policy {
	if rt.sandbox == "" || rt.upstream != nil {
		return policy{tpl: rt.template, public: rt.public}
	}
	if !snap.Exists {
		return policy{tpl: rt.template}
	}
	own := t.cfg.Templates[snap.Template]
	if own == nil {
		// Made from a template since removed from the config (or from none
		// recorded): the route's settings, and never public.
		return policy{tpl: rt.template, exists: true}
	}
	ownPublic := publicBy(own, snap.Settings, snap.Fresh)
	return policy{tpl: own, exists: true, public: rt.public || ownPublic, ownPublic: ownPublic}
}

// publicBy reports whether an existing sandbox made from template own,
// with settings s, is public: its own setting (#23, set through the admin
// API and kept by the runtime) if it has one, else its template's.
// A sandbox of a template no longer configured is never public, nor is
// one whose settings this replica could not re-read lately (fresh false:
// a "public" withdrawn on another replica must not stay open here).
func publicBy(own *config.Template, s records.Settings, fresh bool) bool {
	if own == nil || !fresh {
		return false
	}
	if p := s.Public; p != nil {
		return *p
	}
	return own.Public
}

// decide fills d for r (see decision). d lives in the request's state,
// not on the stack of every front end's goroutine (see logAccess).
func (g *Gateway) decide(r *http.Request, d *decision) {
	t := g.table.Load()
	d.t, d.label = t, "none"
	rt, herr := t.resolve(r.Host)
	if herr != nil {
		d.refused(herr, "")
		return
	}
	d.rt = rt
	var snap sandboxmgr.Snapshot
	if rt.sandbox != "" && rt.upstream == nil {
		d.h = g.sb.Sandbox(rt.sandbox)
		snap = d.h.Snapshot()
	}
	pol := policyOf(t, rt, &snap)
	d.ready, d.known, d.template, d.ownPublic = snap.Ready, snap.Exists, snap.Template, pol.ownPublic
	if !g.access(r, d, pol) {
		return
	}
	if herr := portError(rt, d.tpl); herr != nil {
		d.refused(herr, "")
		return
	}
	switch {
	case rt.upstream != nil:
		d.label = "upstream"
	case d.tpl != nil:
		d.label = d.tpl.Name
	}
}

// access checks r's token for d's route under policy pol and sets d's
// template, subject and way in; false: r is answered (d.end). A token's
// "tpl" claim chooses the template only for a sandbox that does not exist
// yet. A share link (links.go) lets r in without a subject.
func (g *Gateway) access(r *http.Request, d *decision, pol policy) bool {
	t, rt := d.t, d.rt
	d.tpl = pol.tpl
	if pol.public {
		d.by = publicNoToken
		return true
	}
	// A share link: in the URL (what the user opened, checked even next
	// to a valid token), or in a cookie when no token serves. The cookie
	// is looked for only then: a warm request reads no link cookie.
	var link string
	var fromQuery, hasLink bool
	inQuery := strings.Contains(r.URL.RawQuery, auth.LinkParam)
	if inQuery {
		link, fromQuery, hasLink = links.Find(r, t.verifier)
	}
	var res auth.Result
	var err error
	if !fromQuery {
		res, err = t.verifier.Check(r, rt.sandbox)
		if err != nil && !inQuery {
			link, fromQuery, hasLink = links.Find(r, t.verifier)
		}
	}
	if fromQuery || err != nil && hasLink {
		// A link in the URL is what the user opened; a link cookie serves
		// when no token does.
		l, he := g.linkGrant(r, t.verifier, rt, pol, link, fromQuery)
		switch {
		case he != nil:
			d.refused(he, he.Code)
			return false
		case fromQuery:
			d.end = &ending{answer: exchangeLink, link: link, linkExp: l.Expires}
			return false
		}
		d.by, d.link = viaShareLink, l.ID
		return true
	}
	if err != nil {
		he := createNeedsToken(rt, pol, err)
		if he == nil {
			he = authError(err)
		}
		d.refused(he, auth.Reason(err))
		return false
	}
	if res.Claims != nil {
		d.sub = res.Claims.Subject
	}
	if res.Exchange {
		// Whenever the URL still holds a token, even next to a valid
		// cookie, the browser is sent to the clean URL first so the token
		// leaves its address bar and history.
		d.end = &ending{answer: exchangeToken, res: res}
		return false
	}
	if rt.sandbox != "" && rt.upstream == nil && res.Claims != nil && res.Claims.Template != "" {
		// A name the config lacks is the backend's mistake, whether or not
		// the sandbox exists yet; a valid one picks the template of a new
		// sandbox only (policy.go).
		named := t.cfg.Templates[res.Claims.Template]
		if named == nil {
			d.refused(&httpError{Status: http.StatusBadRequest, Code: "unknown_template",
				Msg: "The access token names a template this gateway does not have."}, "")
			return false
		}
		if !pol.exists {
			d.tpl = named
		}
	}
	return true
}

// carryOut answers r as decide ended it.
func (g *Gateway) carryOut(w http.ResponseWriter, r *http.Request, d *decision) {
	e := d.end
	switch e.answer {
	case refuse:
		if e.authFailed != "" {
			g.metrics.AuthFailed(e.authFailed)
		}
		g.fail(w, r, e.err)
	case exchangeToken:
		d.t.verifier.Exchange(w, r, e.res)
	case exchangeLink:
		links.Exchange(w, r, d.t.verifier, e.link, e.linkExp)
	}
}
