package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"
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
	ctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(r.Context()), targetKey{}, t))
	cl = append(cl, cancel)
	// Draining cancels the socket; so does a client that goes away before
	// the backend answered.
	stopDrain := context.AfterFunc(g.draining, cancel)
	cl = append(cl, func() { stopDrain() })
	// The client side is registered for the 1001 close when hijacked.
	uw := &upgradeWriter{ResponseWriter: w, s: g.sockets, sandbox: t.sandbox, cancel: cancel}
	cl = append(cl, uw.done)
	w = uw
	g.metrics.websockets.Inc()
	cl = append(cl, g.metrics.websockets.Dec)
	detached := false
	defer func() {
		if !detached {
			cl.run()
		}
	}()
	stopClient := context.AfterFunc(r.Context(), cancel)
	defer stopClient()

	out := upgradeRequest(r)
	p.rewrite(&httputil.ProxyRequest{In: r.WithContext(ctx), Out: out})
	back, err := p.dialUpgrade(ctx, out, t)
	if err != nil {
		p.errorHandler(w, r, err)
		return
	}
	stopBack := context.AfterFunc(ctx, func() { back.Close() })
	defer func() {
		if !detached {
			stopBack()
			back.Close()
		}
	}()
	back.SetDeadline(time.Now().Add(30 * time.Second)) // the handshake, not the socket
	if err := out.Write(back); err != nil {
		p.errorHandler(w, r, fmt.Errorf("write upgrade request: %w", err))
		return
	}
	br := bufio.NewReaderSize(back, 4<<10)
	res, err := http.ReadResponse(br, out)
	if err != nil {
		p.errorHandler(w, r, fmt.Errorf("read upgrade response: %w", err))
		return
	}
	back.SetDeadline(time.Time{})
	if res.StatusCode != http.StatusSwitchingProtocols {
		// The app refused the upgrade: pass its answer through.
		defer res.Body.Close()
		copyEndToEnd(w.Header(), res.Header)
		w.WriteHeader(res.StatusCode)
		buf := p.rp.BufferPool.Get()
		io.CopyBuffer(w, res.Body, buf)
		p.rp.BufferPool.Put(buf)
		return
	}
	if want, got := out.Header.Get("Upgrade"), res.Header.Get("Upgrade"); !strings.EqualFold(want, got) {
		p.errorHandler(w, r, fmt.Errorf("backend switched to protocol %q when %q was requested", got, want))
		return
	}
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.errorHandler(w, r, fmt.Errorf("hijack for protocol switch: %w", err))
		return
	}
	for k, v := range w.Header() { // X-Request-Id and the like
		if _, ok := res.Header[k]; !ok {
			res.Header[k] = v
		}
	}
	res.Body = nil
	if err := res.Write(client); err != nil {
		client.Close()
		return
	}
	// Bytes either side sent early sit in the readers' buffers: pass them
	// on, then let the buffers go.
	if err := forwardBuffered(back, brw.Reader); err != nil {
		client.Close()
		return
	}
	if err := forwardBuffered(client, br); err != nil {
		client.Close()
		return
	}
	detached = true
	stopClient()
	// Let the server's per-connection state (buffered reader and writer,
	// the request) go: cl keeps uw alive until the socket closes.
	uw.ResponseWriter = nil
	brw, br = nil, nil
	go func() {
		defer cl.run()
		defer stopBack()
		splice(client, back)
	}()
}

// splice copies both ways until either side ends, then closes both. It
// runs one direction on a new goroutine and the other on its own.
func splice(client, back net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() {
		pump(back, readSide(client))
		client.Close()
		back.Close()
	})
	pump(client, back)
	client.Close()
	back.Close()
	wg.Wait()
}

// readSide is the connection to read from: the hijacked client connection
// wraps its writes (for the 1001 close) but reads from the raw socket.
func readSide(c net.Conn) net.Conn {
	if sc, ok := c.(*socketConn); ok {
		return sc.Conn
	}
	return c
}

func forwardBuffered(dst io.Writer, br *bufio.Reader) error {
	n := br.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := br.Peek(n)
	_, err := dst.Write(b)
	return err
}

// pumpBufSize is the buffer a pump borrows while data flows.
const pumpBufSize = 16 << 10

var pumpBufs = sync.Pool{New: func() any { return new([pumpBufSize]byte) }}

// pump copies src to dst. On a plain TCP source it waits for readability
// holding no buffer and borrows one from a pool for each read, so an idle
// socket costs no buffer memory. Other sources (TLS) read into a small
// buffer of their own.
func pump(dst io.Writer, src net.Conn) error {
	wait := readableWaiter(src)
	var small []byte
	if wait == nil {
		small = make([]byte, 2<<10)
	}
	for {
		buf := small
		var pooled *[pumpBufSize]byte
		if wait != nil {
			if err := wait(); err != nil {
				return err
			}
			pooled = pumpBufs.Get().(*[pumpBufSize]byte)
			buf = pooled[:]
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if pooled != nil {
			pumpBufs.Put(pooled)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// upgradeRequest is the outgoing request for an upgrade: hop-by-hop headers
// removed (Upgrade and Connection set again), X-Forwarded-* dropped before
// the rewrite sets ours, as httputil does.
func upgradeRequest(r *http.Request) *http.Request {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Close = false
	out.Body = nil
	out.ContentLength = 0
	up := r.Header.Get("Upgrade")
	conn := connectionTokens(out.Header)
	for k := range out.Header {
		if hopByHop(k, conn) || forwardedHeader(k) {
			delete(out.Header, k)
		}
	}
	out.Header.Set("Connection", "Upgrade")
	out.Header.Set("Upgrade", up)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil // no Go default
	}
	return out
}

// dialUpgrade connects to the target. A failed dial to a sandbox re-runs
// Ensure once (its container may have died or moved).
func (p *proxy) dialUpgrade(ctx context.Context, out *http.Request, t *target) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if t.url != nil {
		host := out.URL.Host
		if out.URL.Port() == "" {
			if out.URL.Scheme == "https" {
				host = net.JoinHostPort(out.URL.Hostname(), "443")
			} else {
				host = net.JoinHostPort(out.URL.Hostname(), "80")
			}
		}
		if out.URL.Scheme == "https" {
			td := &tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: out.URL.Hostname(), NextProtos: []string{"http/1.1"}}}
			return td.DialContext(ctx, "tcp", host)
		}
		return d.DialContext(ctx, "tcp", host)
	}
	c, err := d.DialContext(ctx, "tcp", t.addr)
	if err == nil || !isDialError(err) {
		return c, err
	}
	old := t.addr
	if err := p.reensure(ctx, t); err != nil {
		return nil, err
	}
	if out.Host == old {
		out.Host = t.addr
	}
	out.URL.Host = t.addr
	return d.DialContext(ctx, "tcp", t.addr)
}
