package gateway

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/h1server"
	"github.com/previewgate/previewgate/internal/meter"
	"github.com/previewgate/previewgate/internal/outbound"
	"github.com/previewgate/previewgate/internal/upstream"
	"github.com/previewgate/previewgate/internal/wire"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// target is where one request goes; it travels in the request context.
type target struct {
	sandbox  string // "" for fixed upstreams
	port     int    // a port host's port (addr has it); 0: the template's port
	addr     string // sandbox endpoint "ip:port"
	instance string // sandboxmgr.Endpoint.Instance: the container run addr belongs to
	url      *url.URL
	tpl      *config.Template
	verifier *auth.Verifier
	host     outbound.Host // what Host (and Origin) the app sees (host.go hostModeFor)
	timing   *meter.Timing // the request waited for a wake: Server-Timing; else nil
	fields   directFields  // the direct path's outbound fields (direct.go)
}

type targetKey struct{}

// poolKey is what upstream connections to t are pooled under: its
// container instance, never its address alone (connPool invariant 1). An
// endpoint without an instance (a Sandboxes implementation that does not
// know one) pools by address, marked so it never matches an instance.
func (t *target) poolKey() string {
	if t.instance != "" {
		return t.instance
	}
	return "addr " + t.addr
}

func targetFrom(ctx context.Context) *target {
	t, _ := ctx.Value(targetKey{}).(*target)
	return t
}

// instanceOf names the container instance a ReverseProxy request goes to
// (false for fixed upstreams), so its connections are pooled per instance.
func instanceOf(r *http.Request) (string, bool) {
	if t := targetFrom(r.Context()); t != nil && t.url == nil {
		return t.poolKey(), true
	}
	return "", false
}

// proxy is the one reverse proxy. Its connections to sandboxes are pooled
// per container instance: the direct path's in pool, ReverseProxy's in one
// http.Transport per instance (transports.go), so that neither ever hands
// a connection of one container to another.
type proxy struct {
	g    *Gateway
	rp   *httputil.ReverseProxy
	tr   *upstream.Transports
	pool *upstream.Pool
	// noDirect sends everything through ReverseProxy (tests compare the
	// two paths).
	noDirect bool
}

func newProxy(g *Gateway) *proxy {
	p := &proxy{g: g}
	p.pool, p.tr = upstream.NewClients(instanceOf)
	p.rp = &httputil.ReverseProxy{
		Rewrite:      p.rewrite,
		Transport:    p.tr,
		BufferPool:   upstream.NewBufferPool(),
		ErrorHandler: p.errorHandler,
		// ReverseProxy clears the response's header map after each 1xx it
		// forwards, taking the gateway's X-Request-Id with it; the direct
		// path keeps it (upstream.ForwardInterim).
		ModifyResponse: checkResponse,
		ErrorLog:       log.New(slogWriter{g.log}, "", 0),
	}
	return p
}

// serve proxies r to t; cl runs when the exchange (or, for an upgrade,
// the socket) ends.
func (p *proxy) serve(w http.ResponseWriter, r *http.Request, t *target, cl closers) {
	if isUpgrade(r) {
		p.serveUpgrade(w, r, t, cl)
		return
	}
	defer cl.run()
	if !p.noDirect && p.serveDirect(w, r, t) {
		return
	}
	// The heads' trace goes in before ReverseProxy adds its own: composed
	// traces return the older hook's error.
	p.rp.ServeHTTP(&upstream.InterimGuard{ResponseWriter: w}, r.WithContext(upstream.BoundHeads(context.WithValue(r.Context(), targetKey{}, t))))
}

func (p *proxy) rewrite(pr *httputil.ProxyRequest) {
	t := targetFrom(pr.In.Context())
	if t.url != nil {
		pr.SetURL(t.url)
	} else {
		pr.Out.URL.Scheme = "http"
		pr.Out.URL.Host = t.addr
	}
	hostPfx, host, query, stripped := t.host.Head(pr.In, t.addr, t.verifier)
	pr.Out.Host = hostPfx + host
	pr.Out.URL.RawQuery = query
	h := make(http.Header, len(pr.In.Header)+4)
	outbound.Fields(pr.In, &stripped, p.g.tls, wire.HeaderSink(h))
	pr.Out.Header = h
}

// errorHandler maps transport failures to honest statuses.
func (p *proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	var herr *httpError
	switch {
	case errors.As(err, &herr):
	case errors.As(err, new(*http.MaxBytesError)):
		p.g.limit.rejected(rejectBody)
		herr = &httpError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Msg: "The request body is larger than this preview accepts.", Err: err}
	case h1server.BodyTimedOut(r):
		// Before the context check: on HTTP/1.1 the timed-out read
		// cancelled r's context, while the client still waits. The
		// Transport returns only once its write loop is done with the
		// body, so the flag is set by then.
		herr = &httpError{Status: http.StatusRequestTimeout, Code: "body_timeout",
			Msg: "The request body did not arrive in time.", Err: err}
	case r.Context().Err() != nil:
		herr = &httpError{Status: statusClientClosed, Code: "client_closed", Err: err}
	case errors.Is(err, upstream.ErrHeadTooLarge):
		// The same answer on every path (#21): the direct path, ReverseProxy,
		// the upgrade handshake, a final head or a 1xx.
		herr = &httpError{Status: http.StatusBadGateway, Code: "upstream_head_too_large",
			Msg: fmt.Sprintf("The app sent a response head (status line and headers) larger than %d KiB.", upstream.MaxResponseHead>>10), Err: err}
	case isTimeout(err):
		herr = &httpError{Status: http.StatusGatewayTimeout, Code: "upstream_timeout",
			Msg: "The app did not answer in time.", Err: err}
	default:
		herr = &httpError{Status: http.StatusBadGateway, Code: "upstream_failed",
			Msg: "The app refused or broke the connection.", Err: err}
	}
	p.g.fail(w, r, herr)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// reensure is the answer to a failed dial to a sandbox: its container
// died or moved. It drops the cached endpoint, runs Ensure again and points
// t at the new address; the error is ready for errorHandler.
//
// On another port than the one the manager watches (a port host, #22), a
// refused dial says only that nothing listens there: the record and the
// pool stay, and unless the manager names another instance the answer is
// 502 port_refused.
func (p *proxy) reensure(ctx context.Context, t *target) error {
	h := p.g.sb.Sandbox(t.sandbox)
	if t.port == 0 {
		p.instanceGone(t.poolKey())
		h.Forget(t.addr)
	}
	ep, err := h.Ensure(ctx, t.tpl, sandboxmgr.Options{})
	if err != nil {
		return ensureError(ctx, fmt.Errorf("re-ensure after dial failure: %w", err))
	}
	if t.port != 0 && ep.Instance == t.instance && t.instance != "" {
		return &httpError{Status: http.StatusBadGateway, Code: "port_refused",
			Msg: fmt.Sprintf("Nothing in the sandbox accepts connections on port %d.", t.port),
			Err: fmt.Errorf("dial %s: refused, instance unchanged", t.addr)}
	}
	addr := wire.PortAddr(ep.Addr, t.port)
	p.g.log.InfoContext(ctx, "sandbox endpoint changed, retrying", "sandbox", t.sandbox, "old", t.addr, "new", addr)
	t.addr, t.instance = addr, ep.Instance
	return nil
}

// instanceGone closes every pooled connection to a container instance that
// stopped, died, paused or was replaced, on both proxy paths.
func (p *proxy) instanceGone(instance string) {
	p.pool.CloseInstance(instance)
	p.tr.CloseInstance(instance)
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// slogWriter adapts the reverse proxy's log.Logger to slog.
type slogWriter struct{ l *slog.Logger }

func (s slogWriter) Write(p []byte) (int, error) {
	s.l.Warn("proxy", "msg", string(p))
	return len(p), nil
}

// checkResponse refuses a 101 (ReverseProxy carries only requests that
// asked for no upgrade: upgrades go through serveUpgrade), and applies
// the way back's rules (outbound.Host.Response), putting the gateway's X-Request-Id
// back on a response after an interim answer: ReverseProxy clears the
// client's headers after each 1xx it forwards.
// Refusing here, not in ReverseProxy's own 101 handling, makes
// ReverseProxy close the body, which for a 101 is the upstream
// connection; its own handling answers 502 and leaves the connection
// open until the garbage collector finds it.
func checkResponse(resp *http.Response) error {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return errUnrequestedSwitch
	}
	if resp.Request == nil {
		return nil
	}
	if t := targetFrom(resp.Request.Context()); t != nil {
		var id []string // nil: the client's header still holds the gateway's
		if upstream.InterimSeen(resp.Request.Context()) > 0 {
			id = resp.Request.Header["X-Request-Id"] // the gateway's, as sent
		}
		t.host.Response(resp.Header, t.addr, id)
		t.timing.AddTo(resp.Header)
	}
	return nil
}
