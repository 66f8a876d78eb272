package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// leanTransport is the HTTP/1.1 client for bodiless requests to sandboxes
// (#9): the request is written and the response read on the calling
// goroutine over a pooled keep-alive connection. http.Transport hands every
// request and response across its per-connection read and write
// goroutines; on a small proxied response that handoff costs more than the
// proxying. Anything else (request bodies, Expect, upgrades, fixed
// upstreams, HTTPS) goes to the standard transport, so its semantics stay
// those of net/http.
type leanTransport struct {
	std         *http.Transport
	dialer      *net.Dialer
	maxIdle     int           // idle connections kept per address
	idleTimeout time.Duration // an idle connection older than this is closed

	mu        sync.Mutex // guards idle and lastSweep
	idle      map[string][]*leanConn
	lastSweep time.Time
}

type leanConn struct {
	conn   net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	addr   string
	idleAt time.Time
}

func newLeanTransport(std *http.Transport, dialer *net.Dialer) *leanTransport {
	return &leanTransport{std: std, dialer: dialer, maxIdle: std.MaxIdleConnsPerHost,
		idleTimeout: std.IdleConnTimeout, idle: make(map[string][]*leanConn)}
}

// lean reports whether req can take the lean path.
func lean(req *http.Request) bool {
	return req.URL.Scheme == "http" && (req.Body == nil || req.Body == http.NoBody) &&
		req.ContentLength == 0 && len(req.TransferEncoding) == 0 &&
		req.Header.Get("Expect") == "" && req.Header.Get("Upgrade") == ""
}

func (t *leanTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !lean(req) {
		return t.std.RoundTrip(req)
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		c, reused, err := t.get(ctx, req.URL.Host)
		if err != nil {
			return nil, err
		}
		// A cancelled request (client gone) unblocks the read at once.
		stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
		resp, err := c.exchange(req)
		if err != nil {
			stop()
			c.conn.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// A kept-alive connection the app closed meanwhile: the request
			// had no body, so sending it again on a new one is safe.
			if reused && attempt == 0 {
				continue
			}
			return nil, err
		}
		resp.Body = &leanBody{body: resp.Body, c: c, t: t, stop: stop, reuse: !resp.Close && !req.Close,
			eof: resp.Body == http.NoBody}
		return resp, nil
	}
}

// exchange writes req and reads its response, skipping 1xx interim answers.
func (c *leanConn) exchange(req *http.Request) (*http.Response, error) {
	if err := req.Write(c.bw); err != nil {
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return nil, err
	}
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
}

// get returns an idle connection to addr, or dials one.
func (t *leanTransport) get(ctx context.Context, addr string) (*leanConn, bool, error) {
	now := time.Now()
	t.mu.Lock()
	for list := t.idle[addr]; len(list) > 0; list = t.idle[addr] {
		c := list[len(list)-1]
		t.idle[addr] = list[:len(list)-1]
		if now.Sub(c.idleAt) < t.idleTimeout {
			t.mu.Unlock()
			return c, true, nil
		}
		t.mu.Unlock()
		c.conn.Close()
		t.mu.Lock()
	}
	t.mu.Unlock()
	conn, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &leanConn{conn: conn, addr: addr, br: bufio.NewReaderSize(conn, 16<<10), bw: bufio.NewWriterSize(conn, 4<<10)}, false, nil
}

// put keeps c for reuse, and now and then closes connections idle too long
// (their sandbox may be gone), so no background goroutine is needed.
func (t *leanTransport) put(c *leanConn) {
	now := time.Now()
	c.idleAt = now
	var stale []*leanConn
	t.mu.Lock()
	if list := t.idle[c.addr]; len(list) < t.maxIdle {
		t.idle[c.addr] = append(list, c)
		c = nil
	}
	if now.Sub(t.lastSweep) > t.idleTimeout/2 {
		t.lastSweep = now
		for addr, list := range t.idle {
			keep := list[:0]
			for _, ic := range list {
				if now.Sub(ic.idleAt) >= t.idleTimeout {
					stale = append(stale, ic)
				} else {
					keep = append(keep, ic)
				}
			}
			if len(keep) == 0 {
				delete(t.idle, addr)
			} else {
				t.idle[addr] = keep
			}
		}
	}
	t.mu.Unlock()
	if c != nil {
		c.conn.Close()
	}
	for _, ic := range stale {
		ic.conn.Close()
	}
}

// CloseIdleConnections closes every idle connection.
func (t *leanTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*leanConn)
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.conn.Close()
		}
	}
	t.std.CloseIdleConnections()
}

// leanBody returns its connection to the pool once the response was read
// to its end, and closes it otherwise.
type leanBody struct {
	body  io.ReadCloser
	c     *leanConn
	t     *leanTransport
	stop  func() bool
	reuse bool
	eof   bool
	done  bool
}

func (b *leanBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

func (b *leanBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	err := b.body.Close()
	// The deadline func must not fire on a connection back in the pool.
	if b.stop() && b.eof && b.reuse && err == nil {
		b.t.put(b.c)
		return nil
	}
	b.c.conn.Close()
	return err
}
