package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/meter"
	"github.com/previewgate/previewgate/internal/outbound"
	"github.com/previewgate/previewgate/internal/wire"
	"github.com/previewgate/previewgate/links"
)

// ServeHTTP runs the request path: host → access → limits → ensure → proxy.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t := g.table.Load()
	hint := hintFor(r)
	if hint != nil {
		t = hint.t // the table the lean loop checked against
	}
	st := new(reqState)
	id := headerValue(r.Header, "X-Request-Id")
	if id == "" || len(id) > 128 {
		id = g.requestID()
		st.ids[0] = id
		r.Header["X-Request-Id"] = st.ids[0:1:1]
	}
	st.ids[1] = id
	w.Header()["X-Request-Id"] = st.ids[1:2:2]
	sw := &st.sw
	sw.Start(w, r)
	sandbox, label, proxied := g.serve(sw, r, t, hint, st)
	status := sw.Final(r)
	took := time.Since(start)
	g.metrics.Request(label, status, took, proxied && !sw.Hijacked())
	g.record(sandbox, st, r, sw, status, took, t)
	if t.cfg.Log.Access {
		g.logAccess(r, id, status, took, sandbox, label)
	}
}

// logAccess writes the access log line. Out of ServeHTTP, whose frame
// would otherwise hold its nine attributes (~400 bytes) on every request's
// stack: an HTTP/2 stream's goroutine starts small, and every byte of the
// frames above the proxy is copied when it grows (#25).
//
//go:noinline
func (g *Gateway) logAccess(r *http.Request, id string, status int, took time.Duration, sandbox, label string) {
	g.log.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("id", id),
		slog.String("method", r.Method), slog.String("host", r.Host), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Duration("took", took),
		slog.String("sandbox", sandbox), slog.String("template", label))
}

// serve handles one request and returns the sandbox id, the metrics label
// (the sandbox's own template, "upstream" or "none") and whether it
// reached the proxy. A hint from the lean loop stands for the route, the
// policy and the access check.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, t *table, hint *leanHint, st *reqState) (sandbox, label string, proxied bool) {
	label = "none"
	var rt route
	var pol policy
	if hint != nil {
		rt, pol = hint.rt, hint.pol
	} else {
		var herr *httpError
		if rt, herr = t.resolve(r.Host); herr != nil {
			g.fail(w, r, herr)
			return
		}
		pol = g.policy(t, rt)
	}
	sandbox = rt.sandbox
	tpl, sub, viaLink, done := g.access(w, r, t, rt, pol, hint)
	if done {
		return
	}
	if herr := portError(rt, tpl); herr != nil {
		g.fail(w, r, herr)
		return
	}
	if rt.upstream != nil {
		label = "upstream"
	} else if tpl != nil {
		label = tpl.Name
	}
	cl, herr := g.admit(w, r, t, rt, tpl, sub, st)
	if herr != nil {
		g.fail(w, r, herr)
		cl.run() // what was admitted before the refusal
		return
	}
	if rt.upstream != nil {
		st.t = target{url: rt.upstream, verifier: t.verifier, host: outbound.Host{Mode: outbound.Upstream}}
		g.proxy.serve(w, r, &st.t, cl)
		return sandbox, label, true
	}
	anonymous := withToken // neither public access nor a link creates (policy.go)
	switch {
	case pol.public:
		anonymous = publicNoToken
	case viaLink:
		anonymous = viaShareLink
	}
	label, proxied = g.serveSandbox(w, r, t, rt, tpl, sub, anonymous, hint, st, cl)
	return sandbox, label, proxied
}

// admit applies the limits to r and takes its admissions. It returns the
// releases owed when r's connection ends (for an upgrade, when its socket
// closes, after ServeHTTP returned), kept in st's room for the usual few
// (exchange admission, touch, a hold or a socket's): no allocation of
// their own. On a refusal they are what was taken before it.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, t *table, rt route, tpl *config.Template, sub string, st *reqState) (closers, *httpError) {
	cl := closers(st.cl[:0])
	if herr := g.limit.allow(w, r, t, rt, tpl, sub, &st.addrs); herr != nil {
		return cl, herr
	}
	// From here the request is its sandbox's to count (traffic.go),
	// whatever answers it: the app, the waiting page, a failed start.
	st.counted = !isStatusRequest(r)
	if isUpgrade(r) {
		release, herr := g.limit.openSocket(r, t, rt.sandbox, &st.addrs)
		if herr != nil {
			return cl, herr
		}
		cl = append(cl, release)
	}
	release, herr := g.admitExchange(st.addrs.Peer(r))
	if herr != nil {
		return cl, herr
	}
	return append(cl, release), nil
}

// serveSandbox wakes or creates rt's sandbox as tpl says and proxies r to
// it. It returns the metrics label (the template of the instance that
// answered) and whether r reached the proxy. cl is its to run, or to hand
// to the proxy with r.
func (g *Gateway) serveSandbox(w http.ResponseWriter, r *http.Request, t *table, rt route, tpl *config.Template, sub string,
	anonymous tokenless, hint *leanHint, st *reqState, cl closers) (label string, proxied bool) {
	handedOff := false
	defer func() {
		if !handedOff {
			cl.run()
		}
	}()
	if tpl == nil {
		g.fail(w, r, &httpError{Status: http.StatusServiceUnavailable, Code: "no_template",
			Msg: "No template is configured to create this sandbox."})
		return "none", false
	}
	label = tpl.Name
	if g.coldStart(w, r, t, rt, tpl, sub, anonymous) {
		return label, false
	}
	var timing *meter.Timing
	var endWatch func() []meter.Span
	// The lean loop found the sandbox ready (hint); otherwise a request
	// that is about to wait is timed.
	if hint == nil {
		if !g.sb.Sandbox(rt.sandbox).Snapshot().Ready {
			endWatch = g.watchWake(rt.sandbox)
		}
	}
	ep, err := g.ensure(r, t, rt, tpl, sub, anonymous)
	if endWatch != nil {
		timing = &meter.Timing{Spans: endWatch(), ProxyStart: time.Now()}
	}
	if err != nil {
		if he := anonymousError(err); anonymous != withToken && he != nil {
			g.fail(w, r, he)
			return label, false
		}
		g.fail(w, r, ensureError(r.Context(), err))
		return label, false
	}
	if own := t.cfg.Templates[ep.Template]; own != nil && own != tpl {
		// The manager's record was behind (another replica made it): the
		// instance's own template governs the proxying.
		tpl, label = own, own.Name
		if herr := portError(rt, tpl); herr != nil {
			g.fail(w, r, herr)
			return label, false
		}
	}
	// Ensure counted as activity; so does the end of the exchange (Touch).
	h := g.sb.Sandbox(rt.sandbox)
	if hint == nil && isLongLived(r) { // the lean loop takes no stream (leanRequest)
		cl = append(cl, h.Hold())
	}
	cl = append(cl, h.Touch)
	handedOff = true
	// Field by field into st's zero target, not a composite literal: the
	// literal's temporary would sit in this frame on every request's
	// stack (see logAccess).
	pt := &st.t
	pt.sandbox, pt.port, pt.addr, pt.instance = rt.sandbox, rt.port, wire.PortAddr(ep.Addr, rt.port), ep.Instance
	pt.tpl, pt.verifier, pt.timing = tpl, t.verifier, timing
	pt.host = hostModeFor(tpl, r)
	g.proxy.serve(w, r, pt, cl)
	return label, true
}

// access checks r's token for route rt under policy pol (a hint from the
// lean loop stands for the check) and returns the template whose settings
// apply and the token's subject. A token's "tpl" claim chooses the
// template only for a sandbox that does not exist yet. done: r was
// answered (refused, or sent to the clean URL after a ?access_token=
// exchange). viaLink: a share link let r in (links.go); it has no subject.
func (g *Gateway) access(w http.ResponseWriter, r *http.Request, t *table, rt route, pol policy, hint *leanHint) (tpl *config.Template, sub string, viaLink, done bool) {
	tpl = pol.tpl
	if pol.public {
		return tpl, "", false, false
	}
	var res auth.Result
	if hint != nil {
		res = hint.res
	} else {
		link, fromQuery, hasLink := links.Find(r, t.verifier)
		var err error
		if !fromQuery {
			res, err = t.verifier.Check(r, rt.sandbox)
		}
		if fromQuery || err != nil && hasLink {
			// A link in the URL is what the user opened; a link cookie
			// serves when no token does.
			exp, he := g.linkGrant(r, t.verifier, rt, pol, link, fromQuery)
			switch {
			case he != nil:
				g.metrics.AuthFailed(he.Code)
				g.fail(w, r, he)
				return nil, "", false, true
			case fromQuery:
				links.Exchange(w, r, t.verifier, link, exp)
				return nil, "", false, true
			}
			return tpl, "", true, false
		}
		if err != nil {
			g.metrics.AuthFailed(auth.Reason(err))
			if he := createNeedsToken(rt, pol, err); he != nil {
				g.fail(w, r, he)
			} else {
				g.fail(w, r, authError(err))
			}
			return nil, "", false, true
		}
	}
	if res.Claims != nil {
		sub = res.Claims.Subject
	}
	if res.Exchange {
		// Whenever the URL still holds a token, even next to a valid
		// cookie, the browser is sent to the clean URL first so the token
		// leaves its address bar and history.
		t.verifier.Exchange(w, r, res)
		return nil, "", false, true
	}
	if rt.sandbox != "" && rt.upstream == nil && res.Claims != nil && res.Claims.Template != "" {
		// A name the config lacks is the backend's mistake, whether or not
		// the sandbox exists yet; a valid one picks the template of a new
		// sandbox only (policy.go).
		named := t.cfg.Templates[res.Claims.Template]
		if named == nil {
			g.fail(w, r, &httpError{Status: http.StatusBadRequest, Code: "unknown_template",
				Msg: "The access token names a template this gateway does not have."})
			return nil, "", false, true
		}
		if !pol.exists {
			tpl = named
		}
	}
	return tpl, sub, false, false
}

// isLongLived reports requests that may stay open for long: WebSocket
// upgrades and SSE streams. They keep their sandbox awake while open.
func isLongLived(r *http.Request) bool {
	return isUpgrade(r) || strings.Contains(headerValue(r.Header, "Accept"), "text/event-stream")
}

// isUpgrade reports a protocol upgrade request (WebSocket).
func isUpgrade(r *http.Request) bool { return headerValue(r.Header, "Upgrade") != "" }

// newRequestIDPrefix returns a random per-process prefix for request ids.
func newRequestIDPrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestID returns a unique id for a request without X-Request-Id.
func (g *Gateway) requestID() string {
	var b [64]byte
	return string(strconv.AppendUint(append(append(b[:0], g.reqPfx...), '-'), g.reqSeq.Add(1), 36))
}

// reqState is what one request keeps on the heap, in one allocation
// instead of one each (#25): its status writer, the proxy's target, the
// first releases owed, and the X-Request-Id values of the request and the
// response (two slots, so neither header shares the other's slice).
type reqState struct {
	sw  meter.Writer
	t   target
	cl  [4]func()
	ids [2]string
	// counted: passed the access check and the limits, not the
	// gateway's own status stream (record).
	counted bool
	addrs   wire.Addrs
}

// headerValue is h.Get(key) for a key in canonical form (every caller
// passes a literal; TestHeaderValueKeys checks them): the same answer
// without canonicalizing the key on each call, several per request (#25).
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
