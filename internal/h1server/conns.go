package h1server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/previewgate/previewgate/internal/wire"
)

// ConnLimiter caps the open client connections of the preview listeners,
// in all and per client IP, counted from accept to close (HTTP, handed
// over to net/http, or upgraded to a WebSocket alike). A connection over a
// cap is closed at once, before it costs a goroutine. The client IP is the
// socket's peer (IPv6: its /64); trusted proxies do not matter at accept.
// One ConnLimiter may be shared by several Servers; the admin listener has
// none, and the global cap leaves descriptors for it (#13).
type ConnLimiter struct {
	max, perIP int // 0: no cap

	mu   sync.Mutex // guards open and byIP
	open int
	byIP map[netip.Addr]int
}

// ConnCaps are a ConnLimiter's caps (limits.max_connections and
// limits.connections_per_ip).
type ConnCaps struct {
	// Max caps all connections; zero: derived from the process's
	// descriptor limit (DefaultMaxConnections).
	Max int
	// PerIP caps one client IP's connections; zero: no cap.
	PerIP int
}

// NewConnLimiter returns the limiter for caps.
func NewConnLimiter(caps ConnCaps) *ConnLimiter {
	max := caps.Max
	if max == 0 {
		if n, ok := openFileLimit(); ok {
			max = DefaultMaxConnections(n)
		}
	}
	return &ConnLimiter{max: max, perIP: caps.PerIP, byIP: make(map[netip.Addr]int)}
}

// fdReserve is what the global connection cap leaves of the descriptor
// limit for everything that is not a client connection or its upstream:
// the listeners, the admin listener and its clients, the Docker API
// client and its event stream, config and certificate files, DNS.
const fdReserve = 128

// DefaultMaxConnections is limits.max_connections for a descriptor limit
// of nofile: half of what fdReserve leaves, since each client connection
// may hold one upstream connection too (a proxied request or a
// WebSocket), at least 16.
func DefaultMaxConnections(nofile uint64) int {
	if nofile > math.MaxInt32 {
		nofile = math.MaxInt32 // unlimited, or near enough
	}
	n := int(nofile)
	return max((n-fdReserve)/2, 16)
}

// admit counts a new connection from peer, or reports which cap it is
// over.
func (l *ConnLimiter) admit(peer netip.Addr) (key netip.Addr, over string) {
	key = wire.IPKey(peer)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.open >= l.max:
		return key, "max_connections"
	case l.perIP > 0 && l.byIP[key] >= l.perIP:
		return key, "connections_per_ip"
	}
	l.open++
	l.byIP[key]++
	return key, ""
}

func (l *ConnLimiter) release(key netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if n := l.byIP[key] - 1; n > 0 {
		l.byIP[key] = n
	} else {
		delete(l.byIP, key)
	}
}

// Acquire counts one more holder for peer (a connection, or anything else
// the caller caps the same way: the gateway counts proxied exchanges in
// flight with a second ConnLimiter, since HTTP/2 carries many on one
// connection). It returns the release, or which cap peer is over.
func (l *ConnLimiter) Acquire(peer netip.Addr) (release func(), over string) {
	key, over := l.admit(wire.NormAddr(peer))
	if over != "" {
		return nil, over
	}
	return func() { l.release(key) }, ""
}

// Max returns the global cap (0: none).
func (l *ConnLimiter) Max() int { return l.max }

// Open returns the connections counted now.
func (l *ConnLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// countedConn gives its ConnLimiter slot back when closed, whoever closes
// it (the lean loop, net/http, a WebSocket splice).
type countedConn struct {
	net.Conn
	l    *ConnLimiter
	key  netip.Addr
	done atomic.Bool
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	if c.done.CompareAndSwap(false, true) {
		c.l.release(c.key)
	}
	return err
}

// SyscallConn exposes the socket (wire.ReadableWaiter).
func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// peerOf is the socket peer's address.
func peerOf(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return wire.NormAddr(ta.AddrPort().Addr())
	}
	return wire.PeerAddr(c.RemoteAddr().String())
}

// errBodyTooSlow ends a request body that does not arrive fast enough.
var errBodyTooSlow = errors.New("request body too slow")

// bodyRate is a request body that must keep arriving (#13): each read
// gets at most timeout to return data (nginx's client_body_timeout), and
// the time spent waiting in reads must stay within timeout plus
// minRate's share of the bytes read so far (a read may wait
// timeout + read/minRate - waited), so a body dribbled at a byte every
// few seconds ends too. Time the handler spends not reading (the sandbox
// taking the body slowly) does not count. It sets the connection's (or
// HTTP/2 stream's) read deadline through the ResponseController and
// clears it at the end of the body, so net/http's background read is
// unaffected.
type bodyRate struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	minRate float64 // bytes per second; 0: none
	read    int64
	waited  time.Duration
	ended   bool
	// timedOut: the body ended because its client stopped sending it in
	// time (BodyTimedOut). Set by whoever reads the body (the proxy's
	// transport reads it on a goroutine of its own).
	timedOut atomic.Bool
}

type bodyRateKey struct{}

// BodyTimedOut reports whether r's body ended because its client did not
// send it in time (limits.body_timeout, limits.body_min_rate), as opposed
// to a client that left. Such a client still waits for an answer: 408.
// Ask this before r's context: on HTTP/1.1 a read of the connection that
// times out cancels the request's context too, just as a client leaving
// does. The flag is set before the failed Read returns, so a reader that
// has seen the error sees it set.
func BodyTimedOut(r *http.Request) bool {
	b, _ := r.Context().Value(bodyRateKey{}).(*bodyRate)
	return b != nil && b.timedOut.Load()
}

func (b *bodyRate) Read(p []byte) (int, error) {
	if b.ended {
		return b.ReadCloser.Read(p)
	}
	wait := b.timeout
	if b.minRate > 0 {
		budget := b.timeout + time.Duration(float64(b.read)/b.minRate*float64(time.Second)) - b.waited
		wait = min(wait, budget)
	}
	if wait <= 0 {
		b.timedOut.Store(true)
		return 0, fmt.Errorf("%w: %d bytes in %v", errBodyTooSlow, b.read, b.waited.Round(time.Millisecond))
	}
	t0 := time.Now()
	if err := b.rc.SetReadDeadline(t0.Add(wait)); err != nil {
		b.ended = true // not settable here (a test's writer): read as is
		return b.ReadCloser.Read(p)
	}
	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(t0)
	b.read += int64(n)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.timedOut.Store(true)
		err = fmt.Errorf("%w: %d bytes in %v: %w", errBodyTooSlow, b.read, b.waited.Round(time.Millisecond), err)
	case err != nil:
		b.ended = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// limitBodies applies bodyRate to every request with a body.
//
// An HTTP/2 request that can carry no body bytes gets http.NoBody first, as
// net/http's HTTP/1.1 server gives such requests (#17): its HTTP/2 server
// hands every request a body reader, even a GET whose stream ended with its
// headers, so nothing downstream could tell a bodiless request from one
// with a body (nor send it on without a body of unknown length). No
// bytes can come: ContentLength is 0 when the stream ended with the
// headers, or when content-length: 0 was sent, which the HTTP/2 server
// enforces (more DATA is a stream error). A request that declares
// trailers keeps its reader.
//
// A request with a body carries its bodyRate in its context, for
// BodyTimedOut: one more allocation, on requests that have a body only.
func limitBodies(h http.Handler, timeout time.Duration, minRate int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && r.ContentLength == 0 && r.Trailer == nil && r.Body != nil && r.Body != http.NoBody {
			r.Body = http.NoBody
		}
		if timeout > 0 && r.Body != nil && r.Body != http.NoBody {
			b := &bodyRate{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: timeout, minRate: float64(minRate)}
			r.Body = b
			r = r.WithContext(context.WithValue(r.Context(), bodyRateKey{}, b))
		}
		h.ServeHTTP(w, r)
	})
}
