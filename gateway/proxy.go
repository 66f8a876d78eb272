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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
)

// target is where one request goes; it travels in the request context.
type target struct {
	sandbox     string // "" for fixed upstreams
	addr        string // sandbox endpoint "ip:port"
	url         *url.URL
	tpl         *config.Template
	verifier    *auth.Verifier
	rewriteHost bool
}

type targetKey struct{}

func targetFrom(ctx context.Context) *target {
	t, _ := ctx.Value(targetKey{}).(*target)
	return t
}

// proxy is the one reverse proxy with its one shared transport.
type proxy struct {
	g    *Gateway
	rp   *httputil.ReverseProxy
	tr   *http.Transport
	pool *connPool
	// noDirect sends everything through ReverseProxy (tests compare the
	// two paths).
	noDirect bool
}

func newProxy(g *Gateway) *proxy {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // pass encodings through untouched
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
	p := &proxy{g: g, tr: tr, pool: newConnPool(dialer, tr.MaxIdleConnsPerHost, tr.IdleConnTimeout)}
	p.rp = &httputil.ReverseProxy{
		Rewrite:      p.rewrite,
		Transport:    tr,
		BufferPool:   newBufferPool(),
		ErrorHandler: p.errorHandler,
		ErrorLog:     log.New(slogWriter{g.log}, "", 0),
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
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

func (p *proxy) rewrite(pr *httputil.ProxyRequest) {
	t := targetFrom(pr.In.Context())
	if t.url != nil {
		pr.SetURL(t.url)
	} else {
		pr.Out.URL.Scheme = "http"
		pr.Out.URL.Host = t.addr
		pr.Out.Host = pr.In.Host
		if t.rewriteHost {
			pr.Out.Host = t.addr
		}
	}
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
	pr.SetXForwarded()
	if p.g.tls {
		pr.Out.Header.Set("X-Forwarded-Proto", "https")
	}
	// Tokens never reach the sandbox.
	t.verifier.Strip(pr.Out)
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
	case r.Context().Err() != nil:
		herr = &httpError{Status: statusClientClosed, Code: "client_closed", Err: err}
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
func (p *proxy) reensure(ctx context.Context, t *target) error {
	p.g.sb.Forget(t.sandbox, t.addr)
	ep, err := p.g.sb.Ensure(ctx, t.sandbox, t.tpl)
	if err != nil {
		return ensureError(ctx, fmt.Errorf("re-ensure after dial failure: %w", err))
	}
	p.g.log.InfoContext(ctx, "sandbox endpoint changed, retrying", "sandbox", t.sandbox, "old", t.addr, "new", ep.Addr)
	t.addr = ep.Addr
	return nil
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// bufferPool recycles the reverse proxy's copy buffers. It pools array
// pointers, so Put converts the slice back without allocating.
type bufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
}

func (b *bufferPool) Get() []byte { return b.p.Get().(*[copyBufferSize]byte)[:] }

func (b *bufferPool) Put(x []byte) {
	if cap(x) == copyBufferSize {
		b.p.Put((*[copyBufferSize]byte)(x[:copyBufferSize]))
	}
}

// slogWriter adapts the reverse proxy's log.Logger to slog.
type slogWriter struct{ l *slog.Logger }

func (s slogWriter) Write(p []byte) (int, error) {
	s.l.Warn("proxy", "msg", string(p))
	return len(p), nil
}

// connectionTokens lists, canonicalized, the headers that h's Connection
// header marks as hop-by-hop (computed once per message, not per header).
func connectionTokens(h http.Header) []string {
	var out []string
	for _, line := range h["Connection"] {
		for _, tok := range strings.Split(line, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				out = append(out, http.CanonicalHeaderKey(tok))
			}
		}
	}
	return out
}

// hopByHop reports headers that belong to one connection, not the message
// (RFC 9110 7.6.1), given the message's connectionTokens.
func hopByHop(k string, conn []string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return slices.Contains(conn, k)
}

// forwardedHeader reports the client-sent forwarding headers the gateway
// replaces with its own.
func forwardedHeader(k string) bool {
	switch k {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

// copyEndToEnd copies src's end-to-end headers into dst.
func copyEndToEnd(dst, src http.Header) {
	conn := connectionTokens(src)
	for k, vv := range src {
		if !hopByHop(k, conn) {
			dst[k] = vv
		}
	}
}
