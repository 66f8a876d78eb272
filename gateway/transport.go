package gateway

import (
	"bufio"
	"context"
	"net"
	"sync"
	"time"
)

// connPool keeps HTTP/1.1 keep-alive connections to sandbox endpoints for
// the direct path (direct.go), which writes requests and reads responses
// on the handler's goroutine (#9): http.Transport hands every request and
// response across its per-connection read and write goroutines, which on
// the small responses dev servers mostly serve costs more than the
// proxying itself.
type connPool struct {
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

func newConnPool(dialer *net.Dialer, maxIdle int, idleTimeout time.Duration) *connPool {
	return &connPool{dialer: dialer, maxIdle: maxIdle, idleTimeout: idleTimeout, idle: make(map[string][]*leanConn)}
}

// get returns an idle connection to addr (reused: true), or dials one.
func (t *connPool) get(ctx context.Context, addr string) (c *leanConn, reused bool, err error) {
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
	conn = newRawConn(conn)
	return &leanConn{conn: conn, addr: addr, br: bufio.NewReaderSize(conn, 16<<10), bw: bufio.NewWriterSize(conn, 4<<10)}, false, nil
}

// put keeps c for reuse, and now and then closes connections idle too long
// (their sandbox may be gone), so no background goroutine is needed.
func (t *connPool) put(c *leanConn) {
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

// closeIdle closes every idle connection.
func (t *connPool) closeIdle() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*leanConn)
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.conn.Close()
		}
	}
}
