// Package gateway is previewgate's HTTP handler chain: it maps a host to a
// sandbox, checks the access token, applies limits, wakes the sandbox through
// sandboxmgr and reverse-proxies HTTP, WebSocket and SSE to it. It reports
// what it did to a Metrics it is handed and never imports the admin API or
// a metrics registry. It never calls Docker or verifies signatures itself.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/h1server"
	"github.com/previewgate/previewgate/internal/tunnel"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// Sandboxes is what the gateway needs from the sandbox manager.
// *sandboxmgr.Manager implements it.
type Sandboxes interface {
	// Ensure returns a ready endpoint for id, waking or creating it from tpl.
	// Errors wrap sandboxmgr.ErrUnavailable, ErrCapacity or ErrNotReady.
	// ctx bounds only the caller's wait.
	Ensure(ctx context.Context, id string, tpl *config.Template) (sandboxmgr.Endpoint, error)
	// EnsureWith is Ensure with a wake policy and a create hook; errors
	// also wrap sandboxmgr.ErrAsleep and whatever opts.OnCreate returned.
	EnsureWith(ctx context.Context, id string, tpl *config.Template, opts sandboxmgr.Options) (sandboxmgr.Endpoint, error)
	// Cached returns id's endpoint if known ready, without waiting.
	Cached(id string) (sandboxmgr.Endpoint, bool)
	// Known reports whether sandbox id exists as far as the manager knows,
	// and the template it was made from; no runtime call.
	Known(id string) (template string, ok bool)
	// Wake starts EnsureWith in the background; Progress follows it.
	Wake(id string, tpl *config.Template, opts sandboxmgr.Options)
	// Progress reports where id's wake stands (the waiting page).
	Progress(id string) sandboxmgr.Progress
	// Forget drops a cached endpoint after a failed dial to addr.
	Forget(id, addr string)
	// Touch records activity on id.
	Touch(id string)
	// Hold marks a long-lived connection on id until release is called.
	Hold(id string) (release func())
	// Settings are id's own settings and share links as this replica
	// knows them (no runtime call); RefreshSettings reloads them, at most
	// once a second per sandbox (links.go).
	Settings(id string) sandboxmgr.Settings
	RefreshSettings(ctx context.Context, id string) sandboxmgr.Settings
}

var _ Sandboxes = (*sandboxmgr.Manager)(nil)

// Gateway serves preview hosts. Create it with New, feed it configs with
// Apply; it is an http.Handler.
type Gateway struct {
	sb        Sandboxes
	log       *slog.Logger
	tls       bool // previews are served over TLS
	table     atomic.Pointer[table]
	proxy     *proxy
	limit     *limiter
	metrics   Metrics
	traffic   Traffic
	sockets   *tunnel.Registry
	creates   *createCounter // creates_per_subject_per_hour; outlives reloads
	announced announced      // ids worth a certificate before they exist (certworth.go)
	// exchanges counts proxied exchanges in flight per client and in all,
	// with the connection caps (limits.go admitExchange).
	exchanges *h1server.ConnLimiter
	reqSeq    atomic.Uint64 // request ids
	reqPfx    string

	upgrades sync.WaitGroup // upgraded (WebSocket) requests in flight
	draining context.Context
	drain    context.CancelFunc
}

// Options configure New. Zero values work.
type Options struct {
	// TLS says previews are served over HTTPS (cookie names, X-Forwarded-Proto).
	TLS bool
	// Metrics receives what the gateway did. Nil means nothing is recorded.
	Metrics Metrics
	// Traffic receives each request proxied to a sandbox (the per-sandbox
	// request log). Nil means nothing is recorded.
	Traffic Traffic
}

// New returns a gateway serving cfg. It owns the auth verifier built for
// each applied config.
func New(cfg *config.Config, sb Sandboxes, opts Options, log *slog.Logger) (*Gateway, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{sb: sb, log: log, tls: opts.TLS}
	g.draining, g.drain = context.WithCancel(context.Background())
	g.proxy = newProxy(g)
	g.limit = newLimiter()
	g.metrics = orNoMetrics(opts.Metrics)
	g.traffic = opts.Traffic
	if g.traffic == nil {
		g.traffic = noTraffic{}
	}
	g.sockets = tunnel.NewRegistry()
	g.creates = newCreateCounter(time.Now)
	g.announced.now = time.Now
	g.exchanges = h1server.NewConnLimiter(ConnCaps(cfg.Limits))
	g.limit.onReject = g.metrics.Rejected
	g.reqPfx = newRequestIDPrefix()
	if err := g.Apply(cfg); err != nil {
		return nil, err
	}
	return g, nil
}

// table is everything a request needs from one config, prepared once per
// config so the hot path does a single atomic load.
type table struct {
	cfg             *config.Config
	domains         []string // lower-case, no trailing dot
	routes          map[string]*route
	defaultTemplate *config.Template
	verifier        *auth.Verifier
}

// route is what a host addresses: a sandbox or a fixed upstream.
type route struct {
	sandbox  string           // sandbox id, or "" for upstream routes
	port     int              // <port>-sandbox-<id>: that port of the sandbox; 0: its template's port
	template *config.Template // template to create the sandbox from; may be nil
	upstream *url.URL         // fixed upstream, or nil
	// public: the route itself is declared public (routes[].public). A
	// sandbox is public also when its own template is (policy).
	public bool
}

// Apply builds the table for cfg completely, then swaps it in. If any step
// fails, the old table keeps serving. In-flight requests keep the table they
// loaded.
func (g *Gateway) Apply(cfg *config.Config) error {
	commit, _, err := g.Prepare(cfg)
	if err != nil {
		return err
	}
	commit()
	return nil
}

// Prepare builds the table for cfg completely (its JWKS fetch included)
// without changing what serves, for config.WatcherConfig.Prepare: commit
// swaps it in and does no I/O; drop releases a table that is never
// committed. Preparations may overlap.
func (g *Gateway) Prepare(cfg *config.Config) (commit, drop func(), err error) {
	t, err := g.buildTable(cfg)
	if err != nil {
		return nil, nil, err
	}
	commit = func() {
		old := g.table.Swap(t)
		if old != nil && old.verifier != nil {
			// JWKS refresh of the old verifier stops; requests that still
			// hold it keep verifying against its cached keys.
			old.verifier.Close()
		}
	}
	drop = func() {
		if t.verifier != nil {
			t.verifier.Close()
		}
	}
	return commit, drop, nil
}

func (g *Gateway) buildTable(cfg *config.Config) (*table, error) {
	v, err := auth.NewVerifier(cfg.Auth, g.tls, auth.WithLogger(g.log.With("component", "auth")))
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	t := &table{cfg: cfg, routes: make(map[string]*route, len(cfg.Routes)), verifier: v,
		defaultTemplate: cfg.Template("")}
	for _, d := range cfg.Domains {
		t.domains = append(t.domains, strings.TrimSuffix(strings.ToLower(d), "."))
	}
	for _, r := range cfg.Routes {
		rt := &route{sandbox: r.Sandbox, public: r.Public}
		if r.Upstream != "" {
			u, err := url.Parse(string(r.Upstream))
			if err != nil {
				v.Close()
				return nil, fmt.Errorf("route %s: upstream: %w", r.Host, err)
			}
			rt.upstream = u
		} else {
			rt.template = cfg.Template(r.Template)
		}
		t.routes[strings.ToLower(r.Host)] = rt
	}
	return t, nil
}

// The gateway is the sandbox manager's Listener: it closes what it holds to
// a sandbox or a container instance that goes away.
var _ sandboxmgr.Listener = (*Gateway)(nil)

// BeforeStop closes the WebSockets proxied to sandbox id with 1001 (going
// away) before the manager stops or removes it.
func (g *Gateway) BeforeStop(id string) { g.CloseSockets(id) }

// InstanceGone closes every pooled upstream connection to a container
// instance (sandboxmgr.Endpoint.Instance) that stopped, died, paused or was
// replaced; the sandbox manager reports them.
func (g *Gateway) InstanceGone(instance string) { g.proxy.instanceGone(instance) }

// Close starts draining: upgraded connections are cancelled, and Close waits
// for them to end. Call it after http.Server.Shutdown, which does not wait
// for hijacked connections.
func (g *Gateway) Close() {
	g.drain()
	if n := g.sockets.CloseAll(""); n > 0 {
		g.log.Info("closed websockets with 1001 (going away)", "count", n)
	}
	g.upgrades.Wait()
	g.proxy.pool.CloseIdle()
	g.proxy.tr.CloseIdleConnections()
	if t := g.table.Load(); t != nil && t.verifier != nil {
		t.verifier.Close()
	}
}

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
	sw.ResponseWriter = w
	sw.countIn(r)
	sandbox, label, proxied := g.serve(sw, r, t, hint, st)
	status := sw.final(r)
	took := time.Since(start)
	g.metrics.Request(label, status, took, proxied && !sw.hijacked)
	g.record(sandbox, proxied, r, sw, status, took, t)
	if t.cfg.Log.Access {
		g.log.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("id", id),
			slog.String("method", r.Method), slog.String("host", r.Host), slog.String("path", r.URL.Path),
			slog.Int("status", status), slog.Duration("took", took),
			slog.String("sandbox", sandbox), slog.String("template", label))
	}
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
	if herr := g.limit.allow(w, r, t, rt, tpl, sub); herr != nil {
		g.fail(w, r, herr)
		return
	}
	// Releases owed when the connection ends: for an upgrade, when its
	// socket closes, after ServeHTTP returned.
	// Room for the usual releases (exchange admission, touch, a hold or
	// a socket's) in st: no allocation of its own.
	cl := closers(st.cl[:0])
	handedOff := false // the proxy owns cl from then on
	defer func() {
		if !handedOff {
			cl.run()
		}
	}()
	if isUpgrade(r) {
		release, herr := g.limit.openSocket(r, t, rt.sandbox)
		if herr != nil {
			g.fail(w, r, herr)
			return
		}
		cl = append(cl, release)
	}
	release, herr := g.admitExchange(r)
	if herr != nil {
		g.fail(w, r, herr)
		return
	}
	cl = append(cl, release)
	if rt.upstream != nil {
		handedOff = true
		st.t = target{url: rt.upstream, verifier: t.verifier, host: hostMode{rewrite: true}}
		g.proxy.serve(w, r, &st.t, cl)
		return sandbox, label, true
	}
	if tpl == nil {
		g.fail(w, r, &httpError{Status: http.StatusServiceUnavailable, Code: "no_template",
			Msg: "No template is configured to create this sandbox."})
		return
	}
	anonymous := withToken // neither public access nor a link creates (policy.go)
	switch {
	case pol.public:
		anonymous = publicNoToken
	case viaLink:
		anonymous = viaShareLink
	}
	if g.coldStart(w, r, t, rt, tpl, sub, anonymous) {
		return
	}
	var timing *wakeTiming
	var endWatch func() []phaseSpan
	// The lean loop found the sandbox ready (hint); otherwise a request
	// that is about to wait is timed.
	if hint == nil {
		if _, ready := g.sb.Cached(rt.sandbox); !ready {
			endWatch = g.watchWake(rt.sandbox)
		}
	}
	ep, err := g.ensure(r, t, rt, tpl, sub, anonymous)
	if endWatch != nil {
		timing = &wakeTiming{spans: endWatch(), proxyStart: time.Now()}
	}
	if err != nil {
		if he := anonymousError(err); anonymous != withToken && he != nil {
			g.fail(w, r, he)
			return
		}
		g.fail(w, r, ensureError(r.Context(), err))
		return
	}
	if own := t.cfg.Templates[ep.Template]; own != nil && own != tpl {
		// The manager's record was behind (another replica made it): the
		// instance's own template governs the proxying.
		tpl, label = own, own.Name
		if herr := portError(rt, tpl); herr != nil {
			g.fail(w, r, herr)
			return
		}
	}
	id := rt.sandbox
	g.sb.Touch(id)
	if isLongLived(r) {
		cl = append(cl, g.sb.Hold(id))
	}
	cl = append(cl, func() { g.sb.Touch(id) })
	handedOff = true
	st.t = target{sandbox: id, port: rt.port, addr: portAddr(ep.Addr, rt.port), instance: ep.Instance, tpl: tpl,
		verifier: t.verifier, host: g.hostModeFor(tpl, r), timing: timing}
	g.proxy.serve(w, r, &st.t, cl)
	return sandbox, label, true
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
		link, fromQuery, hasLink := t.verifier.Link(r)
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
				t.verifier.ExchangeLink(w, r, link, exp)
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

// fail logs e and answers the client.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, e *httpError) {
	if e.Status == statusClientClosed {
		g.log.DebugContext(r.Context(), "client went away", "host", r.Host, "err", e.Err)
		return
	}
	lvl := slog.LevelDebug
	if e.Status >= 500 {
		lvl = slog.LevelWarn
	}
	g.log.Log(r.Context(), lvl, "request failed", "host", r.Host, "path", r.URL.Path,
		"status", e.Status, "code", e.Code, "err", e.Err)
	writeError(w, r, e)
}

func authError(err error) *httpError {
	status := auth.Status(err)
	msg := "This preview needs an access token (" + auth.Reason(err) + "). Open it again from the app that created it."
	code := "unauthorized"
	if status == http.StatusForbidden {
		msg, code = "Access denied: "+auth.Reason(err)+".", "forbidden"
	}
	return &httpError{Status: status, Code: code, Msg: msg, Err: err}
}

// ensureError maps sandbox manager failures to honest statuses.
func ensureError(ctx context.Context, err error) *httpError {
	if he := lifecycleError(err); he != nil {
		return he
	}
	if he := startFailure(err); he != nil && ctx.Err() == nil {
		return he
	}
	switch {
	case ctx.Err() != nil:
		return &httpError{Status: statusClientClosed, Code: "client_closed", Err: err}
	case errors.Is(err, sandboxmgr.ErrNotReady):
		return &httpError{Status: http.StatusGatewayTimeout, Code: "not_ready",
			Msg: "The sandbox did not become ready in time.", Err: err}
	case errors.Is(err, sandboxmgr.ErrCapacity):
		return &httpError{Status: http.StatusServiceUnavailable, Code: "busy", RetryAfter: 10,
			Msg: "The preview service is busy. Try again in a moment.", Err: err}
	case errors.Is(err, sandboxmgr.ErrUnavailable):
		return &httpError{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: 5,
			Msg: "The preview service cannot reach its sandbox runtime right now.", Err: err}
	case errors.Is(err, sandboxmgr.ErrForeignContainer):
		// Another gateway's (or someone's) container holds the name: never
		// touched, and not this gateway's to fix.
		return &httpError{Status: http.StatusConflict, Code: "foreign_container", Msg: foreignMsg(err), Err: err}
	}
	return &httpError{Status: http.StatusBadGateway, Code: "sandbox_failed",
		Msg: "The sandbox could not be started.", Err: err}
}

// foreignMsg tells whoever opened the preview whose container holds its
// name and what the operator can do (#21).
func foreignMsg(err error) string {
	var fe *sandboxmgr.ForeignError
	switch {
	case errors.As(err, &fe) && fe.Scope != "":
		return fmt.Sprintf("A container with this preview's name belongs to the gateway scope %q, not to this gateway. "+
			"Open it through that gateway (or give this one scope: %s), or remove the container %s if nobody needs it.",
			fe.Scope, fe.Scope, fe.Container)
	case errors.As(err, &fe) && fe.Managed:
		return "A container with this preview's name belongs to another gateway's scope (other labels). " +
			"Open it through that gateway, or remove the container " + fe.Container + " if nobody needs it."
	}
	return "A container with this preview's name exists but was not made by previewgate. Remove or rename it to use this preview."
}

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
	sw  statusWriter
	t   target
	cl  [4]func()
	ids [2]string
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
