package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/previewgate/previewgate/internal/outbound"
	"github.com/previewgate/previewgate/internal/tunnel"
	"github.com/previewgate/previewgate/internal/upstream"
	"github.com/previewgate/previewgate/internal/wire"
)

// closers are releases owed when a request's connection closes: for an
// upgraded connection that is when its socket closes, long after ServeHTTP
// returned.
type closers []func()

func (c closers) run() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// serveUpgrade proxies a protocol upgrade (WebSocket) itself instead of
// through httputil.ReverseProxy, to hold an idle socket pair in little
// memory (#9): ReverseProxy keeps the transport's buffered reader and
// writer, two 32 KiB copy buffers and four goroutines per pair for its
// whole life. Here the handler returns once the pair is spliced; two
// goroutines copy with pooled buffers taken only while data flows, and
// the server's per-connection buffers are freed.
//
// cl runs when the socket closes (or at once if the upgrade fails).
func (p *proxy) serveUpgrade(w http.ResponseWriter, r *http.Request, t *target, cl closers) {
	g := p.g
	g.upgrades.Add(1)
	cl = append(cl, g.upgrades.Done)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	cl = append(cl, cancel)
	// Draining cancels the socket; so does a client that goes away before
	// the backend answered.
	stopDrain := context.AfterFunc(g.draining, cancel)
	cl = append(cl, func() { stopDrain() })
	// The client side is registered for the 1001 close when hijacked.
	uw := g.sockets.Wrap(w, t.sandbox, cancel)
	t.stream.attach(g.streams, uw) // its grant's end closes it too (grants.go)
	cl = append(cl, uw.Done)
	w = uw
	g.metrics.WebSocketOpened()
	cl = append(cl, g.metrics.WebSocketClosed)
	detached := false
	defer func() {
		if !detached {
			cl.run()
		}
	}()
	stopClient := context.AfterFunc(r.Context(), cancel)
	defer stopClient()

	out := p.upgradeRequest(r.WithContext(ctx), t)
	back, err := p.dialUpgrade(ctx, out, t)
	if err != nil {
		p.errorHandler(w, r, t, err)
		return
	}
	stopBack := context.AfterFunc(ctx, func() { back.Close() })
	defer func() {
		if !detached {
			stopBack()
			back.Close()
		}
	}()
	res, br, ok := p.handshake(w, r, out, back, t)
	if !ok {
		return
	}
	client, err := uw.Take(back, br, res, out)
	if err != nil {
		if !uw.Hijacked() {
			p.errorHandler(w, r, t, err)
		}
		return
	}
	detached = true
	stopClient()
	br = nil // cl keeps uw alive until the socket closes; the server's state may go
	id := t.sandbox
	go func() {
		defer cl.run()
		defer stopBack()
		in, out := tunnel.Splice(client, back)
		g.traffic.AddBytes(id, in, out) // "" (a fixed upstream): nothing
	}()
}

// handshake sends the upgrade request on back and reads the answer. It
// reports false, having answered w, unless the app switched to the
// protocol asked for: an app that refuses the upgrade has its answer
// passed through. The caller releases the response.
func (p *proxy) handshake(w http.ResponseWriter, r, out *http.Request, back net.Conn, t *target) (*upstream.Response, *bufio.Reader, bool) {
	res, br, err := tunnel.Handshake(back, out, r.Header.Get("Upgrade"), func(ir *upstream.Response) { upstream.ForwardInterim(w, ir.Status, ir.Header) })
	if err != nil {
		p.errorHandler(w, r, t, err)
		return nil, nil, false
	}
	if res.Status != http.StatusSwitchingProtocols {
		h := w.Header()
		id := h["X-Request-Id"]
		upstream.RelayHeader(h, res)
		t.host.Response(h, t.addr, id)
		upstream.Relay(w, res, p.bufs) // a cut body ends the reply, as before
		return nil, nil, false
	}
	// The 101 gets the gateway's own headers where it has none (Take):
	// the app's X-Request-Id goes, so the gateway's is the one sent.
	t.host.Response(res.Header, t.addr, nil)
	return res, br, true
}

// upgradeRequest is the outgoing request for an upgrade: the outbound
// policy's head (internal/outbound, as the exchange writes it), without
// the switch's own fields (tunnel.Handshake sets them).
func (p *proxy) upgradeRequest(r *http.Request, t *target) *http.Request {
	out := r.Clone(r.Context())
	out.RequestURI, out.Close, out.Body, out.ContentLength = "", false, nil, 0
	out.URL.Scheme, out.URL.Host = "http", t.addr
	if t.url != nil {
		u := t.joinURL(r)
		out.URL = &u
	}
	hostPfx, host, query, stripped := t.host.Head(r, t.addr, t.verifier)
	out.Host = hostPfx + host
	out.URL.RawQuery = query
	h := make(http.Header, len(r.Header)+4)
	outbound.Fields(r, &stripped, p.g.tls, wire.HeaderSink(h))
	out.Header = h
	return out
}

// dialUpgrade connects to the target. A new connection to a sandbox is
// used only once its handle confirmed the peer with the runtime, as on
// the exchange's path (upstream invariant 10); a failed dial or an
// unconfirmed peer re-runs Ensure once (its container may have died or
// moved).
func (p *proxy) dialUpgrade(ctx context.Context, out *http.Request, t *target) (net.Conn, error) {
	d := &net.Dialer{Timeout: tunnel.DialTimeout}
	if t.url != nil {
		return tunnel.DialURL(ctx, d, out.URL)
	}
	c, err := p.dialSandbox(ctx, d, t)
	if err == nil || !retriable(err) {
		return c, err
	}
	old := t.addr
	if err := p.reensure(ctx, t, err); err != nil {
		return nil, err
	}
	if out.Host == old {
		out.Host = t.addr
	}
	out.URL.Host = t.addr
	return p.dialSandbox(ctx, d, t)
}

// dialSandbox dials t's address and has t's handle confirm the peer; an
// unconfirmed connection is closed unused.
func (p *proxy) dialSandbox(ctx context.Context, d *net.Dialer, t *target) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil || t.h == nil {
		return c, err
	}
	if err := t.h.Confirm(ctx, t.instance, t.addr); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %s: %w", upstream.ErrUnconfirmed, t.addr, err)
	}
	return c, nil
}

// CloseSockets closes the WebSockets proxied to sandbox id with 1001 (going
// away), without blocking on clients (tunnel.Registry.CloseAll), and
// returns how many it closed.
func (g *Gateway) CloseSockets(id string) int { return g.sockets.CloseAll(id) }
