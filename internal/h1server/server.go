package h1server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/previewgate/previewgate/internal/wire"
)

// Server serves a handler over HTTP/1.1 and HTTP/2, in plain text or TLS:
// the lean loop (h1.go: one goroutine per connection, the head parsed in
// place, the answer written straight to the socket, without net/http's
// per-request background read, context and buffers, #9) for what the
// package doc's invariant 1 allows, net/http for the rest. Once handed
// over, a connection stays with net/http.
type Server struct {
	// HTTP serves what the lean loop hands over; its timeouts and header
	// limit apply to the lean loop too. Its ConnState hook is the Server's.
	HTTP *http.Server
	// TLSConfig, when set, makes Serve terminate TLS (HTTP/2 by ALPN).
	TLSConfig *tls.Config
	// Conns caps the open connections at accept; nil means no caps.
	// New sets one from Options.Conns; several preview
	// listeners should share one, and the admin listener has none.
	Conns *ConnLimiter

	// Lean says which requests the parser took (invariant 1) the lean loop
	// serves; false hands the connection to net/http. nil turns the lean
	// loop off. It reads the request's head only; set it before Serve.
	Lean func(r *http.Request) bool

	log *slog.Logger
	// writeTimeout bounds each write to a client (limits.write_timeout).
	writeTimeout time.Duration

	handoff     *handoffListener
	handoffOnce sync.Once
	sweepStop   chan struct{} // closed when Shutdown or Close is done: ends the sweep
	stopOnce    sync.Once     // closes sweepStop
	sweepDone   chan struct{} // closed when the sweep goroutine has ended

	closing atomic.Bool
	leanN   atomic.Uint64 // requests served by the lean loop
	mu      sync.Mutex    // guards lns and conns
	lns     map[net.Listener]struct{}
	conns   map[*h1conn]struct{}
	wg      sync.WaitGroup // lean connection goroutines

	hmu   sync.Mutex // guards heads
	heads map[net.Conn]*headWatch

	streams streamSet // HTTP/2 streams under the write watch (h2writes.go)

	refused    atomic.Uint64 // connections closed over a cap
	refusedLog atomic.Int64  // Unix nanoseconds of the last log of them
}

// Options are a Server's limits, resolved values (the config's defaults
// are applied by the caller; zero means none only where a field says so).
type Options struct {
	ReadHeaderTimeout time.Duration // cuts slowloris clients
	IdleTimeout       time.Duration // bounds keep-alive
	WriteTimeout      time.Duration // bounds each write to a client
	MaxHeaderBytes    int           // bounds header memory
	// BodyTimeout and BodyMinRate (bytes per second) bound slow request
	// bodies (bodyRate).
	BodyTimeout time.Duration
	BodyMinRate int64
	// Conns caps the open connections (NewServer's Conns).
	Conns ConnCaps
}

// New returns a Server for h with the limits of opts, its connections
// capped by a ConnLimiter of its own for opts.Conns (set Conns to share
// one, or nil for none). The lean loop is off until Lean is set.
func New(opts Options, h http.Handler, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		HTTP: &http.Server{
			ReadHeaderTimeout: opts.ReadHeaderTimeout,
			IdleTimeout:       opts.IdleTimeout,
			MaxHeaderBytes:    opts.MaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		Conns:        NewConnLimiter(opts.Conns),
		writeTimeout: opts.WriteTimeout,
		log:          log,
		heads:        make(map[net.Conn]*headWatch),
		sweepStop:    make(chan struct{}),
		sweepDone:    make(chan struct{}),
		lns:          make(map[net.Listener]struct{}),
		conns:        make(map[*h1conn]struct{}),
	}
	s.streams.timeout = s.writeTimeout
	s.streams.drainTimeout = min(s.writeTimeout, drainWriteTimeout)
	s.HTTP.Handler = limitBodies(s.watchStreams(h), opts.BodyTimeout, opts.BodyMinRate)
	// nginx's default is 128, Go's 250; each stream a client holds costs a
	// goroutine and buffers (h2writes.go).
	s.HTTP.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: maxStreams}
	s.HTTP.ConnState = s.connState
	return s
}

// LeanRequests is how many requests the lean loop served (for tests and
// benchmarks that check which path a request took).
func (s *Server) LeanRequests() uint64 { return s.leanN.Load() }

// Serve accepts connections on ln until Shutdown or Close, then returns
// http.ErrServerClosed. It may be called for several listeners.
func (s *Server) Serve(ln net.Listener) error {
	s.handoffOnce.Do(func() {
		s.handoff = newHandoffListener(ln.Addr())
		if s.TLSConfig != nil && s.HTTP.TLSConfig == nil {
			// HTTP/2 for handed-over TLS connections. A copy: net/http
			// configures HTTP/2 by writing to its TLS config when its Serve
			// starts, while handshakes on ours may already run.
			s.HTTP.TLSConfig = s.TLSConfig.Clone()
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
	var failed int // accept failures in this burst
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			if isTemporaryAccept(err) {
				// Out of descriptors and the like: back off as net/http
				// does, rather than spin, and keep serving when they free
				// up. One log line per burst.
				if failed == 0 {
					s.log.Warn("accept failed; backing off until it works again", "err", err)
				}
				failed++
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		if failed > 0 {
			s.log.Info("accepting again", "failed", failed)
			failed = 0
		}
		backoff = 0
		lim := s.Conns
		var key netip.Addr
		if lim != nil {
			var over string
			if key, over = lim.admit(peerOf(c)); over != "" {
				c.Close()
				s.overCap(over, key)
				continue
			}
		}
		s.wg.Add(1)
		go s.serveConn(c, lim, key)
	}
}

// overCap logs connections closed over a cap, at most once per
// overCapLogEvery.
func (s *Server) overCap(limit string, key netip.Addr) {
	n := s.refused.Add(1)
	now := time.Now().UnixNano()
	last := s.refusedLog.Load()
	if now-last >= int64(overCapLogEvery) && s.refusedLog.CompareAndSwap(last, now) {
		s.log.Warn("connections over a cap closed at accept", "limit", limit, "client", key.String(), "total", n)
	}
}

const overCapLogEvery = 10 * time.Second

// maxStreams is the HTTP/2 streams a client may have open on one
// connection. Browsers open up to 100 per connection.
const maxStreams = 100

// handshakeTimeout bounds a TLS handshake when no header timeout is set.
const handshakeTimeout = 10 * time.Second

func isTemporaryAccept(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || (errors.As(err, &ne) && ne.Timeout())
}

// serveConn terminates TLS if configured, then runs the lean loop or hands
// the connection to net/http. Its first head is due as invariant 3 says:
// the lean loop reads under that deadline, and a connection handed over
// before its head is complete is watched until it is (watchHead).
func (s *Server) serveConn(c net.Conn, lim *ConnLimiter, key netip.Addr) {
	defer s.wg.Done()
	c = wire.NewRawConn(c, s.writeTimeout)
	if lim != nil {
		c = &countedConn{Conn: c, l: lim, key: key}
	}
	var headBy time.Time
	if d := s.HTTP.ReadHeaderTimeout; d > 0 {
		headBy = time.Now().Add(d)
	}
	if s.TLSConfig != nil {
		tc := tls.Server(c, s.TLSConfig)
		// A handshake is bounded even without a header timeout: Close
		// waits for this goroutine.
		hsBy := headBy
		if hsBy.IsZero() {
			hsBy = time.Now().Add(handshakeTimeout)
		}
		tc.SetDeadline(hsBy)
		if err := tc.Handshake(); err != nil {
			s.log.Debug("TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
			tc.Close()
			return
		}
		tc.SetDeadline(time.Time{})
		c = tc
		if tc.ConnectionState().NegotiatedProtocol == "h2" || s.Lean == nil {
			s.handOver(c, nil, headBy) // net/http sees the *tls.Conn: HTTP/2, r.TLS
			return
		}
	} else if s.Lean == nil {
		s.handOver(c, nil, headBy)
		return
	}
	hc := newH1conn(s, c, headBy)
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

// Shutdown stops accepting, closes idle connections, and waits until every
// request in flight has been answered or ctx ends. Like http.Server's, it
// does not wait for upgraded (WebSocket) connections. Writes stay under
// watch until it returns, HTTP/2 streams' at a drain's tighter bound
// (h2writes.go), so a stalled client does not hold it until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	s.streams.drain(time.Now())
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
			s.endSweep()
			return httpErr
		case <-ctx.Done():
			s.closeAll()
			<-httpShut
			s.endSweep()
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
	s.endSweep()
	return err
}

// endSweep stops the sweep and waits for it.
func (s *Server) endSweep() {
	s.stopOnce.Do(func() { close(s.sweepStop) })
	<-s.sweepDone
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
// and the writes of HTTP/2 streams (h2writes.go) until Shutdown or Close
// is done: while Shutdown waits, the requests it waits for are still
// held to their bounds (#24).
func (s *Server) sweep() {
	defer close(s.sweepDone)
	t := time.NewTicker(watchAfter / 2)
	defer t.Stop()
	for {
		select {
		case <-s.sweepStop:
			return
		case now := <-t.C:
			s.mu.Lock()
			for c := range s.conns {
				c.watchIfSlow(now)
			}
			s.mu.Unlock()
			s.streams.sweep(now)
		}
	}
}
