package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/previewgate/previewgate/internal/wire"
)

// Pool keeps HTTP/1.1 keep-alive connections to sandboxes, pooled per
// container instance; see the package doc for its invariants.
type Pool struct {
	dialer       *net.Dialer
	maxIdle      int           // idle connections kept per instance
	idleTimeout  time.Duration // an idle connection older than this is closed
	writeTimeout time.Duration // bounds each write to a sandbox

	mu        sync.Mutex // guards idle, gen, genOrder and lastSweep
	idle      map[string][]*Conn
	gen       map[string]uint64 // per instance, bumped by closeInstance; absent: 0
	genOrder  []string          // gen's keys, oldest first (bounded by maxGens)
	lastSweep time.Time
}

// maxGens bounds how many closed instances the pool remembers. A run that
// ended never comes back under its key; only a connection still in use on
// one forgotten meanwhile could be pooled under a key nobody asks for
// again, until idleTimeout closes it.
const maxGens = 4096

// WriteTimeout bounds each write to a sandbox (a request head the
// app does not take).
const WriteTimeout = 30 * time.Second

// Conn is one pooled upstream connection.
type Conn struct {
	Net      net.Conn
	R        *bufio.Reader // reads Net, counting (Answered)
	W        *bufio.Writer
	pool     *Pool
	instance string
	addr     string // what it was dialed to: it serves only requests for addr
	gen      uint64 // the instance's generation when dialed
	idleAt   time.Time
	nread    int64 // bytes read from conn since it was taken from the pool
	// expire sets Net's deadline in the past: the context hook of an
	// exchange not under a wire.Abort (watch). Made once per connection,
	// so that registering it allocates no closure per exchange.
	expire func()
}

// Answered reports whether the upstream sent any byte since the connection
// was taken from the pool: a failed exchange on a reused connection may be
// sent again only when it did not.
func (c *Conn) Answered() bool { return c.nread > 0 }

// Read reads from the connection, counting bytes for Answered.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Net.Read(p)
	c.nread += int64(n)
	return n, err
}

// NewPool returns the pool of connections to sandboxes and fixed
// upstreams: dials within 5 s with TCP keep-alives, at most 256 idle
// connections per instance for at most 90 s, every write bounded by
// WriteTimeout (invariant 5).
func NewPool() *Pool { return newPool(WriteTimeout) }

// newPool is NewPool with writes bounded by writeTimeout (tests bound
// them shorter).
func newPool(writeTimeout time.Duration) *Pool {
	return &Pool{dialer: &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle: 256, idleTimeout: 90 * time.Second, writeTimeout: writeTimeout,
		idle: make(map[string][]*Conn), gen: make(map[string]uint64)}
}

// get returns an idle connection of req's instance to its address
// (reused: true), or dials one; req.Fresh always dials. An instance's idle
// connections to its other ports are never handed out for addr (invariant
// 1).
func (t *Pool) get(ctx context.Context, req *Request) (c *Conn, reused bool, err error) {
	instance, addr, fresh := req.Instance, req.Addr, req.Fresh
	now := time.Now()
	for {
		t.mu.Lock()
		list := t.idle[instance]
		i := len(list) - 1
		for i >= 0 && list[i].addr != addr {
			i-- // most recent first; an instance has few ports
		}
		if i < 0 || fresh {
			gen := t.gen[instance]
			t.mu.Unlock()
			return t.dial(ctx, req, gen)
		}
		c = list[i]
		copy(list[i:], list[i+1:])
		list[len(list)-1] = nil
		t.idle[instance] = list[:len(list)-1]
		t.mu.Unlock()
		if now.Sub(c.idleAt) < t.idleTimeout && !wire.IdleReadable(c.Net) {
			c.nread = 0
			return c, true, nil
		}
		c.Net.Close()
	}
}

func (t *Pool) dial(ctx context.Context, req *Request, gen uint64) (*Conn, bool, error) {
	conn, err := t.dialer.DialContext(ctx, "tcp", req.Addr)
	if err != nil {
		return nil, false, err
	}
	if req.Confirm != nil {
		if err := req.Confirm.Confirm(ctx, req.Instance, req.Addr); err != nil {
			conn.Close()
			return nil, false, fmt.Errorf("%w: %s: %w", ErrUnconfirmed, req.Addr, err)
		}
	}
	conn = wire.NewRawConn(conn, t.writeTimeout)
	if req.TLS != nil {
		tc := tls.Client(conn, req.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, false, fmt.Errorf("tls handshake with %s: %w", req.Addr, err)
		}
		conn = tc
	}
	c := &Conn{Net: conn, pool: t, instance: req.Instance, addr: req.Addr, gen: gen}
	c.R = bufio.NewReaderSize(c, 16<<10)
	c.W = bufio.NewWriterSize(c.Net, 4<<10)
	c.expire = func() { c.Net.SetDeadline(time.Unix(1, 0)) }
	return c, false, nil
}

// put keeps c for reuse after an exchange whose response ended exactly at
// its framing (Body.Close, its only caller, decides that), and now and
// then closes connections idle too long, so no background goroutine is
// needed.
func (t *Pool) put(c *Conn) {
	if c.R.Buffered() > 0 {
		c.Net.Close() // the upstream sent more than its response
		return
	}
	now := time.Now()
	c.idleAt = now
	var stale []*Conn
	t.mu.Lock()
	if c.gen == t.gen[c.instance] {
		if list := t.idle[c.instance]; len(list) < t.maxIdle {
			t.idle[c.instance] = append(list, c)
			c = nil
		}
	}
	if now.Sub(t.lastSweep) > t.idleTimeout/2 {
		t.lastSweep = now
		stale = t.sweepLocked(now)
	}
	t.mu.Unlock()
	if c != nil {
		c.Net.Close()
	}
	for _, ic := range stale {
		ic.Net.Close()
	}
}

// sweepLocked removes and returns the connections idle too long.
// t.mu must be held.
func (t *Pool) sweepLocked(now time.Time) []*Conn {
	var stale []*Conn
	for inst, list := range t.idle {
		keep := list[:0]
		for _, ic := range list {
			if now.Sub(ic.idleAt) >= t.idleTimeout {
				stale = append(stale, ic)
			} else {
				keep = append(keep, ic)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(t.idle, inst)
		} else {
			t.idle[inst] = keep
		}
	}
	return stale
}

// CloseInstance closes every idle connection of instance, and those of it
// in use when they come back (invariant 2).
func (t *Pool) CloseInstance(instance string) {
	t.mu.Lock()
	list := t.idle[instance]
	delete(t.idle, instance)
	if _, ok := t.gen[instance]; !ok {
		t.genOrder = append(t.genOrder, instance)
		if len(t.genOrder) > maxGens {
			delete(t.gen, t.genOrder[0])
			t.genOrder[0] = ""
			t.genOrder = t.genOrder[1:]
		}
	}
	t.gen[instance]++
	t.mu.Unlock()
	for _, c := range list {
		c.Net.Close()
	}
}

// CloseIdle closes every idle connection.
func (t *Pool) CloseIdle() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*Conn)
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.Net.Close()
		}
	}
}
