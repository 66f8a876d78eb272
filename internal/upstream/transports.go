package upstream

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
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

// NewTransports returns a RoundTripper that sends each request on the
// transport of the instance key names (cloned from base on first use), and
// requests key does not name on base.
func NewTransports(base *http.Transport, key func(*http.Request) (string, bool)) *Transports {
	return &Transports{base: base, key: key, byID: make(map[string]*http.Transport)}
}

// RoundTrip sends req on the transport of its target's instance.
func (ts *Transports) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := ts.base
	if k, ok := ts.key(req); ok {
		tr = ts.forInstance(k)
	}
	return tr.RoundTrip(req)
}

// BoundInterim bounds the interim (1xx) answers a sandbox may send before
// its response on the ReverseProxy path, as the direct path does
// (MaxInterim): one more fails the exchange (502). ReverseProxy composes
// its own trace (which forwards each 1xx to the client) over this one, and
// a composed hook returns the older hook's error.
func BoundInterim(ctx context.Context) context.Context {
	st := new(interimState)
	ctx = context.WithValue(ctx, interimKey{}, st)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			st.size.Add(int64(HeaderSize(http.Header(h))))
			if st.n.Add(1) > MaxInterim || st.size.Load() > MaxInterimBytes {
				return fmt.Errorf("%d: %w", code, ErrTooManyInterim)
			}
			return nil
		},
	})
}

// HeaderSize is what h counts against MaxInterimBytes: each field as
// "Key: value\r\n".
func HeaderSize(h http.Header) int {
	n := 0
	for k, vv := range h {
		for _, v := range vv {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// interimState counts the interim answers of one exchange.
type interimState struct{ n, size atomic.Int64 }

type interimKey struct{}

// InterimSeen reports how many interim (1xx) answers the exchange whose
// context went through BoundInterim has received.
func InterimSeen(ctx context.Context) int {
	if st, ok := ctx.Value(interimKey{}).(*interimState); ok {
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
