package gateway

import (
	"bufio"
	"errors"
	"net/http"

	"github.com/previewgate/previewgate/internal/h1server"
	"github.com/previewgate/previewgate/internal/outbound"
	"github.com/previewgate/previewgate/internal/upstream"
	"github.com/previewgate/previewgate/internal/wire"
)

// forward sends r to t and its answer back: the one path of every
// request but an upgrade, over HTTP/1.1 and HTTP/2 alike, to sandboxes
// and fixed upstreams (upstream.Pool.Exchange). The request head is
// written straight from the incoming request to a pooled connection (no
// clone of the request or its headers), its body streamed beside the
// answer, and the answer copied back on the handler goroutine. The
// semantics are httputil.ReverseProxy's, which it replaced (#36):
// hop-by-hop headers dropped both ways, client-sent X-Forwarded-* replaced
// by ours, tokens stripped, trailers passed on both ways, interim 1xx
// answers (103 Early Hints, 100 Continue) forwarded up to
// upstream.MaxInterim, a 101 to a request that asked for no upgrade
// refused (502), Host as the host mode says (TestDirectMatchesReverseProxy
// compares the two).
//
// Retry, as net/http's Transport: a bodiless GET, HEAD or OPTIONS that
// failed on a reused connection before any response byte arrived is sent
// once more on a fresh connection; a request with a body never is (its
// bytes may have gone). A new connection to a sandbox carries nothing
// until its handle confirmed, with the runtime, that the peer is the
// sandbox's instance (upstream.Request.Confirm). A failed dial or a
// connection the runtime does not confirm re-ensures it once (its
// container died or moved): nothing was sent.
func (p *proxy) forward(w http.ResponseWriter, r *http.Request, t *target) {
	ctx := r.Context()
	t.fields = directFields{p: p, r: r, w: w}
	req := &upstream.Request{Method: r.Method, Path: t.outPath(r), Caller: &t.fields}
	if r.Body != nil && r.Body != http.NoBody {
		req.Body, req.ContentLength, req.Trailer = r.Body, r.ContentLength, r.Trailer
		if req.ContentLength == 0 {
			req.ContentLength = -1 // a body of unknown length, as net/http's Transport reads it
		}
		req.Expect100 = wire.EqualFold(headerValue(r.Header, "Expect"), "100-continue")
	}
	if t.url != nil {
		req.Addr, req.TLS = p.upstreamAddr(t.url)
	} else if t.h != nil {
		req.Confirm = t.h // every new connection to the sandbox (sandboxmgr/confirm.go)
	}
	reensured := false
	for {
		// Per attempt: a re-ensure may have moved t (the Host of the local
		// and rewrite modes names its port or address).
		req.Instance = t.poolKey()
		if t.url == nil {
			req.Addr = t.addr
		}
		req.HostPrefix, req.Host, req.Query, t.fields.stripped = t.host.Head(r, t.addr, t.verifier)
		if t.url != nil {
			req.Host = t.url.Host
		}
		resp, err := p.pool.Exchange(ctx, req)
		switch {
		case err == nil:
		case !reensured && t.sandbox != "" && retriable(err):
			reensured = true
			if err = p.reensure(ctx, t, err); err == nil {
				continue
			}
		case !req.Fresh && req.Body == nil && idempotent(r.Method) && errors.Is(err, upstream.ErrUnanswered):
			req.Fresh = true // a kept-alive connection that died meanwhile
			continue
		}
		if err != nil {
			p.errorHandler(w, r, t, clientBodyError(r, t, err))
			return
		}
		if resp.Status == http.StatusSwitchingProtocols {
			// Nobody asked for a protocol switch: what follows is not HTTP
			// the client could be handed.
			upstream.Release(resp) // closes the connection: a 101 is never reused
			p.errorHandler(w, r, t, errUnrequestedSwitch)
			return
		}
		p.copyResponse(w, resp, t)
		return
	}
}

// clientBodyError is err, unless it is a request body the client framed
// wrongly (a chunk size such as 0x5, one that overflows, a bare LF): then
// a 400 naming the sandbox, since the fault is the client's, not the
// app's (502 upstream_failed) nor the network's. The exchange read the
// body's first bytes before sending anything (upstream.Request), so a
// body that fails at once never reached the app; one that fails later
// reaches it cut, never as a whole request. A body too large, too slow
// or of a client that left keeps errorHandler's answer (413, 408, 499).
func clientBodyError(r *http.Request, t *target, err error) error {
	if !errors.Is(err, upstream.ErrRequestBody) || errors.As(err, new(*http.MaxBytesError)) ||
		h1server.BodyTimedOut(r) || r.Context().Err() != nil {
		return err
	}
	return &httpError{Status: http.StatusBadRequest, Code: "bad_request_body",
		Msg: "The request body is malformed (its chunked framing).", Err: err, Sandbox: t.sandbox}
}

// errUnrequestedSwitch: a 101 answer to a request without Upgrade.
var errUnrequestedSwitch = errors.New("upstream switched protocols for a request that asked for no upgrade")

// directFields is the exchange's upstream.Caller: the outbound policy's
// fields, and interim answers relayed to the client. It lives in the
// request's target, so that handing it to the exchange allocates nothing.
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

// copyResponse sends resp to the client with the gateway's own response
// headers added.
func (p *proxy) copyResponse(w http.ResponseWriter, resp *upstream.Response, t *target) {
	h := w.Header()
	id := h["X-Request-Id"]
	upstream.RelayHeader(h, resp)
	t.host.Response(h, t.addr, id)
	t.timing.AddTo(h)
	if err := upstream.Relay(w, resp, p.bufs); err != nil {
		panic(http.ErrAbortHandler) // headers are out: a broken body, not a short one
	}
}
