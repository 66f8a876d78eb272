package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/previewgate/previewgate/config"
)

// Server serves a handler over HTTP/1.1 and HTTP/2, in plain text or TLS.
//
// Plain keep-alive HTTP/1.1 requests for a running sandbox, the gateway's
// hot path, are served by a lean connection loop (h1.go): one goroutine per
// connection that parses the request head in place and writes the response
// straight to the socket, without net/http's per-request background read,
// context and buffers (#9). Everything else — HTTP/2, upgrades, request
// bodies, HTTP/1.0, unusual framing, other handlers — goes to the embedded
// net/http server, handed over with the bytes already read, so net/http's
// behaviour is what clients see there. Once handed over, a connection stays
// with net/http.
type Server struct {
	// HTTP serves what the lean loop hands over; its timeouts and header
	// limit apply to the lean loop too.
	HTTP *http.Server
	// TLSConfig, when set, makes Serve terminate TLS (HTTP/2 by ALPN).
	TLSConfig *tls.Config

	lean leanHandler // nil: every connection goes to net/http
	log  *slog.Logger

	handoff     *handoffListener
	handoffOnce sync.Once
	sweepDone   chan struct{} // closed when the sweep goroutine has ended

	closing atomic.Bool
	leanN   atomic.Uint64 // requests served by the lean loop
	mu      sync.Mutex    // guards lns and conns
	lns     map[net.Listener]struct{}
	conns   map[*h1conn]struct{}
	wg      sync.WaitGroup // lean connection goroutines
}

// leanHandler is a handler that can tell that a plain request would be
// proxied straight to a running sandbox: those requests may take the lean
// loop. *Gateway implements it.
type leanHandler interface {
	http.Handler
	leanRequest(r *http.Request, h *leanHint) bool
}

var _ leanHandler = (*Gateway)(nil)

// NewServer returns a Server for h with the connection limits of cfg:
// ReadHeaderTimeout cuts slowloris clients, IdleTimeout bounds keep-alive,
// MaxHeaderBytes bounds header memory. main, the bench and the tests use
// the same. The lean loop is on when h is the gateway itself.
func NewServer(cfg *config.Config, h http.Handler, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		HTTP: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout.D(),
			IdleTimeout:       cfg.Limits.IdleConnTimeout.D(),
			MaxHeaderBytes:    int(cfg.Limits.MaxHeaderBytes),
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		log:       log,
		sweepDone: make(chan struct{}),
		lns:       make(map[net.Listener]struct{}),
		conns:     make(map[*h1conn]struct{}),
	}
	s.lean, _ = h.(leanHandler)
	return s
}

// Serve accepts connections on ln until Shutdown or Close, then returns
// http.ErrServerClosed. It may be called for several listeners.
func (s *Server) Serve(ln net.Listener) error {
	s.handoffOnce.Do(func() {
		s.handoff = newHandoffListener(ln.Addr())
		if s.TLSConfig != nil && s.HTTP.TLSConfig == nil {
			s.HTTP.TLSConfig = s.TLSConfig // HTTP/2 for handed-over TLS connections
		}
		go s.HTTP.Serve(s.handoff) // ends when Shutdown or Close closes the handoff listener
		go s.sweep()
	})
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			if isTemporaryAccept(err) {
				// Out of descriptors and the like: back off as net/http
				// does, rather than spin.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// handshakeTimeout bounds a TLS handshake when no header timeout is set.
const handshakeTimeout = 10 * time.Second

func isTemporaryAccept(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || (errors.As(err, &ne) && ne.Timeout())
}

// serveConn terminates TLS if configured, then runs the lean loop or hands
// the connection to net/http.
func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	c = newRawConn(c)
	if s.TLSConfig != nil {
		tc := tls.Server(c, s.TLSConfig)
		// A handshake is bounded even without a header timeout: Close
		// waits for this goroutine.
		d := s.HTTP.ReadHeaderTimeout
		if d <= 0 {
			d = handshakeTimeout
		}
		tc.SetDeadline(time.Now().Add(d))
		if err := tc.Handshake(); err != nil {
			s.log.Debug("TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
			tc.Close()
			return
		}
		tc.SetDeadline(time.Time{})
		c = tc
		if tc.ConnectionState().NegotiatedProtocol == "h2" || s.lean == nil {
			s.handOver(c, nil) // net/http sees the *tls.Conn: HTTP/2, r.TLS
			return
		}
	} else if s.lean == nil {
		s.handOver(c, nil)
		return
	}
	hc := newH1conn(s, c)
	if !s.track(hc, true) {
		c.Close()
		return
	}
	hc.serve()
	s.track(hc, false)
}

// track adds or removes a lean connection; adding fails once closing.
func (s *Server) track(c *h1conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		return true
	}
	if s.closing.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// handOver gives c, with the bytes already read from it, to net/http.
func (s *Server) handOver(c net.Conn, buffered []byte) {
	if len(buffered) > 0 {
		c = &prefixConn{Conn: c, prefix: buffered}
	}
	if !s.handoff.push(c) {
		c.Close()
	}
}

// Shutdown stops accepting, closes idle connections, and waits until every
// request in flight has been answered or ctx ends. Like http.Server's, it
// does not wait for upgraded (WebSocket) connections.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	var httpErr error
	httpShut := make(chan struct{})
	go func() {
		defer close(httpShut)
		httpErr = s.HTTP.Shutdown(ctx)
	}()
	leanDone := make(chan struct{})
	go func() {
		defer close(leanDone)
		s.wg.Wait()
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// Connections that went idle after finishing a request close now.
		s.closeIdle()
		select {
		case <-leanDone:
			<-httpShut
			<-s.sweepDone
			return httpErr
		case <-ctx.Done():
			s.closeAll()
			<-httpShut
			<-s.sweepDone
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.stop()
	s.closeAll()
	err := s.HTTP.Close()
	s.wg.Wait()
	<-s.sweepDone
	return err
}

// stop marks the server closing and closes its listeners.
func (s *Server) stop() {
	s.mu.Lock()
	s.closing.Store(true)
	for ln := range s.lns {
		ln.Close()
	}
	s.mu.Unlock()
	s.handoffOnce.Do(func() { close(s.sweepDone) }) // never served: nothing to hand to, nothing to sweep
	if s.handoff != nil {
		s.handoff.Close()
	}
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.closeIfIdle()
	}
}

// closeAll closes every lean connection and cancels the requests on them.
func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.cancel()
		c.conn.Close()
	}
}

// sweep watches the clients of slow lean requests (h1conn.watchIfSlow)
// until the server stops (stop closes the handoff listener).
func (s *Server) sweep() {
	defer close(s.sweepDone)
	t := time.NewTicker(watchAfter / 2)
	defer t.Stop()
	for {
		select {
		case <-s.handoff.done:
			return
		case now := <-t.C:
			s.mu.Lock()
			for c := range s.conns {
				c.watchIfSlow(now)
			}
			s.mu.Unlock()
		}
	}
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
// (readableWaiter).
func (c *prefixConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok || len(c.prefix) > 0 {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}
