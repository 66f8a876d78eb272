package gateway

import (
	"bufio"
	"errors"
	"net/http"

	"github.com/previewgate/previewgate/internal/outbound"
	"github.com/previewgate/previewgate/internal/upstream"
	"github.com/previewgate/previewgate/internal/wire"
)

// serveDirect forwards a bodiless request to a sandbox without
// httputil.ReverseProxy (#9): the request head is written straight from
// the incoming request to a pooled connection (no clone of the request or
// its headers), and the response is copied back on the handler goroutine.
// The semantics are ReverseProxy's: hop-by-hop headers dropped both ways,
// client-sent X-Forwarded-* replaced by ours, tokens stripped, trailers
// passed on, interim 1xx answers (103 Early Hints) forwarded up to
// upstream.MaxInterim, a 101 to a request that asked for no upgrade refused (502),
// Host preserved or rewritten per template. Anything else (other methods,
// bodies, upgrades, fixed upstreams) takes ReverseProxy. It reports false,
// having written nothing, when the request is not for it.
//
// A request that fails on a reused connection before any response byte
// arrived is sent once more on a fresh connection, as net/http's Transport
// does: every request here is a bodiless GET, HEAD or OPTIONS. A failed
// dial re-ensures the sandbox once (its container died or moved).
func (p *proxy) serveDirect(w http.ResponseWriter, r *http.Request, t *target) bool {
	if t.sandbox == "" || !idempotent(r.Method) || r.ContentLength != 0 || (r.Body != nil && r.Body != http.NoBody) ||
		len(r.TransferEncoding) > 0 || headerValue(r.Header, "Expect") != "" || headerValue(r.Header, "Upgrade") != "" {
		return false
	}
	ctx := r.Context()
	t.fields = directFields{p: p, r: r, w: w}
	req := upstream.Request{Method: r.Method, Path: r.URL.EscapedPath(), Caller: &t.fields}
	reensured := false
	for {
		// Per attempt: a re-ensure may have moved t (the Host of the local
		// and rewrite modes names its port or address).
		req.Instance, req.Addr = t.poolKey(), t.addr
		req.HostPrefix, req.Host, req.Query, t.fields.stripped = t.host.Head(r, t.addr, t.verifier)
		resp, err := p.pool.Exchange(ctx, &req)
		switch {
		case err == nil:
		case !reensured && isDialError(err):
			reensured = true
			if err = p.reensure(ctx, t); err == nil {
				continue
			}
		case !req.Fresh && errors.Is(err, upstream.ErrUnanswered):
			req.Fresh = true // a kept-alive connection that died meanwhile
			continue
		}
		if err != nil {
			p.errorHandler(w, r, err)
			return true
		}
		if resp.Status == http.StatusSwitchingProtocols {
			// Nobody asked for a protocol switch: what follows is not HTTP
			// the client could be handed (ReverseProxy answers 502 too).
			upstream.Release(resp) // closes the connection: a 101 is never reused
			p.errorHandler(w, r, errUnrequestedSwitch)
			return true
		}
		p.copyDirectResponse(w, resp, t)
		return true
	}
}

// errUnrequestedSwitch: a 101 answer to a request without Upgrade.
var errUnrequestedSwitch = errors.New("upstream switched protocols for a request that asked for no upgrade")

// directFields is the direct path's upstream.Caller: the outbound
// policy's fields, and interim answers relayed to the client. It lives in
// the request's target, so that handing it to the exchange allocates
// nothing.
type directFields struct {
	p        *proxy
	r        *http.Request
	w        http.ResponseWriter
	stripped wire.Edits
}

func (f *directFields) WriteFields(bw *bufio.Writer) {
	outbound.Fields(f.r, &f.stripped, f.p.g.tls, (*wire.LineSink)(bw))
}

func (f *directFields) Interim(ir *upstream.Response) {
	upstream.ForwardInterim(f.w, ir.Status, ir.Header)
}

// idempotent methods may be sent again after a failed attempt.
func idempotent(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// copyDirectResponse sends resp to the client with the gateway's own
// response headers added.
func (p *proxy) copyDirectResponse(w http.ResponseWriter, resp *upstream.Response, t *target) {
	h := w.Header()
	id := h["X-Request-Id"]
	upstream.RelayHeader(h, resp)
	t.host.Response(h, t.addr, id)
	t.timing.AddTo(h)
	if err := upstream.Relay(w, resp, p.rp.BufferPool); err != nil {
		panic(http.ErrAbortHandler) // headers are out: a broken body, not a short one
	}
}
