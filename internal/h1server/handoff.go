package h1server

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Handing connections to net/http: the listener it serves, the replay of
// bytes the lean loop already read, and the watch on a first request head
// that net/http would otherwise time again.

// handOver gives c, with the bytes already read from it, to net/http.
// headBy, if set, is when c's first request head is due: c has not
// completed one yet.
func (s *Server) handOver(c net.Conn, buffered []byte, headBy time.Time) {
	if len(buffered) > 0 {
		c = &prefixConn{Conn: c, prefix: buffered}
	}
	if !headBy.IsZero() {
		s.watchHead(c, headBy)
	}
	if !s.handoff.push(c) {
		s.connState(c, http.StateClosed)
		c.Close()
	}
}

// headWatch closes a connection handed to net/http that has not completed
// its first request head by the deadline its accept set. net/http starts
// its own header timeout at handover, so a head the lean loop passed on
// unfinished would get a second one, and its HTTP/2 server has none at all
// (an idle connection is held for IdleTimeout).
type headWatch struct {
	timer *time.Timer
	h2    bool // HTTP/2: the first stream, not the preface, is the head
	idle  bool // HTTP/2: net/http marked it idle after the preface
}

// watchHead arms c's head watch.
func (s *Server) watchHead(c net.Conn, by time.Time) {
	w := &headWatch{}
	if tc, ok := c.(*tls.Conn); ok {
		w.h2 = tc.ConnectionState().NegotiatedProtocol == "h2"
	}
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.heads[c] = w
	w.timer = time.AfterFunc(time.Until(by), func() {
		s.hmu.Lock()
		_, armed := s.heads[c]
		delete(s.heads, c)
		s.hmu.Unlock()
		if armed {
			s.log.Debug("no request head in time; closing", "remote", c.RemoteAddr().String())
			c.Close()
		}
	})
}

// connState is the net/http server's ConnState hook: a connection's first
// request head is complete when net/http marks it active (HTTP/1: after
// reading a head; HTTP/2: active, idle after the preface, then active at
// the first stream).
func (s *Server) connState(c net.Conn, st http.ConnState) {
	if st == http.StateNew {
		return
	}
	s.hmu.Lock()
	w := s.heads[c]
	if w == nil {
		s.hmu.Unlock()
		return
	}
	if w.h2 && !w.idle && st == http.StateActive {
		s.hmu.Unlock()
		return // the preface
	}
	if w.h2 && st == http.StateIdle {
		w.idle = true
		s.hmu.Unlock()
		return
	}
	delete(s.heads, c)
	s.hmu.Unlock()
	w.timer.Stop()
}

// handoffListener is the listener net/http serves: its connections are
// the ones the lean loop passes on.
type handoffListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// push passes c to net/http; false once the listener is closed.
func (l *handoffListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// prefixConn replays bytes the lean loop read before handing over.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		if len(c.prefix) == 0 {
			c.prefix = nil // let the lean loop's read buffer go
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// SyscallConn exposes the socket once the replayed bytes are gone, so an
// upgraded connection can still wait for data without holding a buffer
// (wire.ReadableWaiter).
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok || len(c.prefix) > 0 {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}
