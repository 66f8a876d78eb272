package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/h1server"
	"github.com/previewgate/previewgate/internal/meter"
	"github.com/previewgate/previewgate/internal/outbound"
	"github.com/previewgate/previewgate/internal/upstream"
	"github.com/previewgate/previewgate/internal/wire"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// target is where one request goes.
type target struct {
	sandbox  string // "" for fixed upstreams
	port     int    // a port host's port (addr has it); 0: the template's port
	addr     string // sandbox endpoint "ip:port"
	instance string // sandboxmgr.Endpoint.Instance: the container run addr belongs to
	// h is the sandbox's handle (nil for fixed upstreams): it confirms
	// every new connection to addr (upstream.Request.Confirm).
	h        sandboxmgr.Handle
	url      *url.URL
	tpl      *config.Template
	verifier *auth.Verifier
	host     outbound.Host // what Host (and Origin) the app sees (host.go hostModeFor)
	timing   *meter.Timing // the request waited for a wake: Server-Timing; else nil
	fields   directFields  // the exchange's outbound fields (direct.go)
	stream   *stream       // an answer admitted without a token (grants.go); nil: none
	by       tokenless     // how the request got in: a failed start's output is for token holders
}

// poolKey is what upstream connections to t are pooled under: its
// container instance, never its address alone (upstream invariant 1), or
// for a fixed upstream its scheme and host. An endpoint without an
// instance (a Sandboxes implementation that does not know one) pools by
// address, marked so it never matches an instance.
func (t *target) poolKey() string {
	switch {
	case t.url != nil:
		return "upstream " + t.url.Scheme + "://" + t.url.Host
	case t.instance != "":
		return t.instance
	}
	return "addr " + t.addr
}

// proxy is the one reverse proxy: every request but an upgrade goes
// through upstream.Pool's exchange (direct.go), upgrades through
// internal/tunnel (upgrade.go).
type proxy struct {
	g    *Gateway
	pool *upstream.Pool
	bufs *upstream.BufferPool
	// tls are the TLS settings of fixed https upstreams (system roots).
	tls *tls.Config
}

func newProxy(g *Gateway) *proxy {
	return &proxy{g: g, pool: upstream.NewPool(), bufs: upstream.NewBufferPool(),
		tls: &tls.Config{NextProtos: []string{"http/1.1"}}}
}

// serve proxies r to t; cl runs when the exchange (or, for an upgrade,
// the socket) ends.
func (p *proxy) serve(w http.ResponseWriter, r *http.Request, t *target, cl closers) {
	if isUpgrade(r) {
		p.serveUpgrade(w, r, t, cl)
		return
	}
	defer cl.run()
	p.forward(w, r, t)
}

// outPath is the escaped path a request for r gets at t. A fixed
// upstream's own path is joined before r's, as httputil.ReverseProxy's
// SetURL joins them (its own query is not sent: the outbound policy's
// query is r's).
func (t *target) outPath(r *http.Request) string {
	if t.url == nil {
		return r.URL.EscapedPath()
	}
	u := t.joinURL(r)
	return u.EscapedPath()
}

// joinURL is t's fixed upstream URL with r's path joined to its own.
func (t *target) joinURL(r *http.Request) url.URL {
	a, b := t.url, r.URL
	u := url.URL{Scheme: a.Scheme, Host: a.Host, Path: joinSlash(a.Path, b.Path)}
	if a.RawPath != "" || b.RawPath != "" {
		u.RawPath = joinSlash(a.EscapedPath(), b.EscapedPath())
	}
	return u
}

// joinSlash joins two path parts with exactly one slash between them.
func joinSlash(a, b string) string {
	aslash, bslash := strings.HasSuffix(a, "/"), strings.HasPrefix(b, "/")
	switch {
	case aslash && bslash:
		return a + b[1:]
	case !aslash && !bslash:
		return a + "/" + b
	}
	return a + b
}

// upstreamAddr is the host:port of a fixed upstream URL (its scheme's
// port if it names none) and its TLS settings (nil for http).
func (p *proxy) upstreamAddr(u *url.URL) (string, *tls.Config) {
	port := u.Port()
	var tc *tls.Config
	switch {
	case u.Scheme == "https":
		tc = p.tls.Clone()
		tc.ServerName = u.Hostname()
		if port == "" {
			port = "443"
		}
	case port == "":
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port), tc
}

// errorHandler maps transport failures to honest statuses. A failed
// re-ensure's answer carries the app's output only to a holder of the
// sandbox's token (as serveSandbox's own ensure error does).
func (p *proxy) errorHandler(w http.ResponseWriter, r *http.Request, t *target, err error) {
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
	case errors.Is(err, sandboxmgr.ErrMoved):
		// Confirmed twice wrong: the runtime named no instance of the
		// sandbox at the address it gave (upstream.ErrUnconfirmed).
		herr = &httpError{Status: http.StatusBadGateway, Code: "sandbox_moved",
			Msg: "The sandbox's address no longer belongs to it. Try again in a moment.", Err: err}
	case errors.Is(err, upstream.ErrUnconfirmed):
		// The runtime could not be asked whom a new connection reached:
		// nothing was sent (fail closed).
		herr = &httpError{Status: http.StatusServiceUnavailable, Code: "unconfirmed", RetryAfter: 5,
			Msg: "The preview service cannot confirm the sandbox with its runtime right now.", Err: err}
	case errors.Is(err, upstream.ErrHeadTooLarge):
		// The same answer on every path (#21): the exchange or the upgrade
		// handshake, a final head or a 1xx.
		herr = &httpError{Status: http.StatusBadGateway, Code: "upstream_head_too_large",
			Msg: fmt.Sprintf("The app sent a response head (status line and headers) larger than %d KiB.", upstream.MaxResponseHead>>10), Err: err}
	case wire.IsTimeout(err):
		herr = &httpError{Status: http.StatusGatewayTimeout, Code: "upstream_timeout",
			Msg: "The app did not answer in time.", Err: err}
	default:
		herr = &httpError{Status: http.StatusBadGateway, Code: "upstream_failed",
			Msg: "The app refused or broke the connection.", Err: err}
	}
	if herr.Logs != nil && !holdsToken(r, t.by, t.verifier, t.sandbox) {
		herr.Logs = nil // a failed start's output: for token holders only
	}
	p.g.fail(w, r, herr)
}

// reensure is the answer to a failed dial to a sandbox, or to a new
// connection the runtime did not confirm (cause wraps
// sandboxmgr.ErrMoved): its container died or moved. It drops the cached
// endpoint, runs Ensure again (a read of the runtime, the cache dropped)
// and points t at the new address; the error is ready for errorHandler.
//
// On another port than the one the manager watches (a port host, #22), a
// refused dial says only that nothing listens there: the record and the
// pool stay, and unless the manager names another instance the answer is
// 502 port_refused. An unconfirmed instance is gone whatever the port.
func (p *proxy) reensure(ctx context.Context, t *target, cause error) error {
	h := p.g.sb.Sandbox(t.sandbox)
	moved := errors.Is(cause, sandboxmgr.ErrMoved)
	if t.port == 0 || moved {
		p.pool.CloseInstance(t.poolKey())
		h.Forget(t.addr) // on a port host t.addr is not the cached one: Confirm dropped that
	}
	ep, err := h.Ensure(ctx, t.tpl, sandboxmgr.Options{})
	if err != nil {
		return ensureError(ctx, fmt.Errorf("re-ensure after %w: %w", cause, err))
	}
	if !moved && t.port != 0 && ep.Instance == t.instance && t.instance != "" {
		return &httpError{Status: http.StatusBadGateway, Code: "port_refused",
			Msg: fmt.Sprintf("Nothing in the sandbox accepts connections on port %d.", t.port),
			Err: fmt.Errorf("dial %s: refused, instance unchanged", t.addr)}
	}
	addr := wire.PortAddr(ep.Addr, t.port)
	p.g.log.InfoContext(ctx, "sandbox endpoint changed, retrying", "sandbox", t.sandbox, "old", t.addr, "new", addr, "cause", cause)
	t.addr, t.instance = addr, ep.Instance
	return nil
}

// retriable reports whether err, from a dial to a sandbox or the
// confirmation of a new connection, calls for a re-ensure: nothing was
// sent.
func retriable(err error) bool {
	return isDialError(err) || errors.Is(err, sandboxmgr.ErrMoved)
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
