package upstream

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
	"time"

	"github.com/previewgate/previewgate/internal/wire"
)

// Transports is ReverseProxy's RoundTripper: one http.Transport per
// container instance, so the connection pool net/http keys by address
// never hands a connection of a dead container to the one that inherited
// its address (Pool invariant 1, for the ReverseProxy path). Fixed
// upstream routes share one transport. net/http's Transport keeps the
// other invariants itself: it reuses a connection only after its response
// ended exactly, closes one that turns readable while idle ("unsolicited
// response"), and retries a failed reused connection only when nothing was
// sent or received.
type Transports struct {
	base *http.Transport // fixed upstreams; the template of the others
	// key names the instance a request goes to; ok false sends it on base.
	key func(*http.Request) (key string, ok bool)

	mu   sync.Mutex // guards byID
	byID map[string]*http.Transport
}

// maxTransports bounds the per-instance Transports kept. Instances leave
// through closeInstance; if that is missed (no events from the runtime),
// the oldest are dropped beyond this many, closing their idle connections.
const maxTransports = 4096

// NewClients returns the two ways to a sandbox, dialed, bounded and kept
// alike: the direct path's Pool and ReverseProxy's Transports (key names
// a request's instance, as for NewTransports). Both dial within 5 s with
// TCP keep-alives, keep at most 256 idle connections per instance for at
// most 90 s and bound every write by WriteTimeout (invariant 5: a request
// body the app never reads fails then, on ReverseProxy too). The
// Transports pass content encodings through untouched and wait a second
// for a 100 Continue.
func NewClients(key func(*http.Request) (string, bool)) (*Pool, *Transports) {
	return newClients(key, WriteTimeout)
}

// newClients is NewClients with writes bounded by writeTimeout (tests
// bound them shorter).
func newClients(key func(*http.Request) (string, bool), writeTimeout time.Duration) (*Pool, *Transports) {
	const maxIdle, idleTimeout = 256, 90 * time.Second
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wire.NewRawConn(c, writeTimeout), nil
		},
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   maxIdle,
		IdleConnTimeout:       idleTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
	p := NewPool(dialer, maxIdle, idleTimeout)
	p.writeTimeout = writeTimeout
	return p, NewTransports(tr, key)
}

// NewTransports returns a RoundTripper that sends each request on the
// transport of the instance key names (cloned from a copy of base on
// first use), and requests key does not name on that copy. The copy
// bounds response heads by MaxResponseHead whatever base says, and counts
// what its connections read (countConn), so that RoundTrip can tell a head
// over the bound from other failures.
func NewTransports(base *http.Transport, key func(*http.Request) (string, bool)) *Transports {
	base = base.Clone()
	base.MaxResponseHeaderBytes = MaxResponseHead
	dial := base.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countConn{Conn: c}, nil
	}
	return &Transports{base: base, key: key, byID: make(map[string]*http.Transport)}
}

// RoundTrip sends req on the transport of its target's instance. A head
// over MaxResponseHead fails with ErrHeadTooLarge (net/http's own error
// for it has no type to check), for requests whose context went through
// BoundHeads.
func (ts *Transports) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := ts.base
	if k, ok := ts.key(req); ok {
		tr = ts.forInstance(k)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil && headTooLarge(req.Context()) {
		err = fmt.Errorf("%w: %w", ErrHeadTooLarge, err)
	}
	return resp, err
}

// countConn counts the bytes read from a connection. net/http's Transport
// reads through it alone, so the count since a head began is what net/http
// counts against MaxResponseHeaderBytes (persistConn.readLimit).
type countConn struct {
	net.Conn
	n atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// BoundHeads bounds the interim (1xx) answers a sandbox may send before
// its response on the ReverseProxy path, as the direct path does
// (MaxInterim): one more fails the exchange (502). It also follows the
// exchange's connection, so that RoundTrip can report a head over
// MaxResponseHead as ErrHeadTooLarge. ReverseProxy composes its own trace
// (which forwards each 1xx to the client) over this one, and a composed
// hook returns the older hook's error.
func BoundHeads(ctx context.Context) context.Context {
	st := new(exchangeState)
	ctx = context.WithValue(ctx, exchangeKey{}, st)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// Each attempt (net/http retries on a new connection) starts a
		// head at what its connection has read so far: a pooled one has
		// read its last response to the end, and nothing since.
		GotConn: func(info httptrace.GotConnInfo) {
			if c, ok := info.Conn.(*countConn); ok {
				st.headFrom.Store(c.n.Load())
				st.conn.Store(c)
			}
		},
		// After a 1xx net/http starts counting the next head afresh.
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			if c := st.conn.Load(); c != nil {
				st.headFrom.Store(c.n.Load())
			}
			if st.n.Add(1) > MaxInterim {
				return fmt.Errorf("%d: %w", code, ErrTooManyInterim)
			}
			return nil
		},
	})
}

// exchangeState is what BoundHeads learns of one exchange.
type exchangeState struct {
	n        atomic.Int64 // interim answers received
	conn     atomic.Pointer[countConn]
	headFrom atomic.Int64 // conn's count where the head being read began
}

type exchangeKey struct{}

// headTooLarge reports whether the exchange of ctx read MaxResponseHead
// bytes or more of its last head: net/http's own condition (readLimit
// exhausted) for "server response headers exceeded".
func headTooLarge(ctx context.Context) bool {
	st, ok := ctx.Value(exchangeKey{}).(*exchangeState)
	if !ok {
		return false
	}
	c := st.conn.Load()
	return c != nil && c.n.Load()-st.headFrom.Load() >= MaxResponseHead
}

// InterimSeen reports how many interim (1xx) answers the exchange whose
// context went through BoundHeads has received.
func InterimSeen(ctx context.Context) int {
	if st, ok := ctx.Value(exchangeKey{}).(*exchangeState); ok {
		return int(st.n.Load())
	}
	return 0
}

func (ts *Transports) forInstance(key string) *http.Transport {
	var evicted *http.Transport
	ts.mu.Lock()
	tr := ts.byID[key]
	if tr == nil {
		if len(ts.byID) >= maxTransports {
			for k, old := range ts.byID {
				delete(ts.byID, k)
				evicted = old
				break
			}
		}
		tr = ts.base.Clone()
		ts.byID[key] = tr
	}
	ts.mu.Unlock()
	if evicted != nil {
		evicted.CloseIdleConnections()
	}
	return tr
}

// closeInstance closes the idle connections of instance and forgets its
// transport. Requests in flight on it finish; their connections then idle
// in a transport nothing reaches any more until its IdleConnTimeout
// closes them: they can never carry another request.
func (ts *Transports) CloseInstance(instance string) {
	ts.mu.Lock()
	tr := ts.byID[instance]
	delete(ts.byID, instance)
	ts.mu.Unlock()
	if tr != nil {
		tr.CloseIdleConnections()
	}
}

// CloseIdleConnections closes every idle connection of every transport.
func (ts *Transports) CloseIdleConnections() {
	ts.mu.Lock()
	all := make([]*http.Transport, 0, len(ts.byID)+1)
	for _, tr := range ts.byID {
		all = append(all, tr)
	}
	ts.mu.Unlock()
	all = append(all, ts.base)
	for _, tr := range all {
		tr.CloseIdleConnections()
	}
}
