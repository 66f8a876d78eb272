package gateway

import (
	"io"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/previewgate/previewgate/internal/wire"
)

// Traffic receives every request proxied to a sandbox (#23): the
// per-sandbox request log and counters (*traffic.Recorder implements it).
// Record is called on the request path after the response: it must be
// cheap, must not block and must keep nothing of the request beyond the
// values it is handed. path never holds the query.
type Traffic interface {
	Record(id, method, path string, status int, took time.Duration, in, out int64, client netip.Addr)
	// AddBytes adds a WebSocket's bytes after its 101, when it closed.
	AddBytes(id string, in, out int64)
}

// noTraffic records nothing: Options.Traffic left nil.
type noTraffic struct{}

func (noTraffic) Record(string, string, string, int, time.Duration, int64, int64, netip.Addr) {}
func (noTraffic) AddBytes(string, int64, int64)                                               {}

// countBody counts a request body's bytes as the proxy reads them. It
// lives in the request's statusWriter, so counting costs no allocation.
// n is atomic: a transport may still be writing the body upstream when
// the handler returns (a response that came before the whole upload).
type countBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (b *countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// countIn makes sw count r's body, if it has one.
func (sw *statusWriter) countIn(r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		sw.body.ReadCloser = r.Body
		r.Body = &sw.body
	}
}

// record reports a request for a sandbox, if counted: it passed the
// access check and the limits, so a client without a token cannot fill
// the log (or push sandboxes out of it) with made-up ids. Whatever
// answered it counts (the app, the waiting page, a failed start's 502 or
// 504: what the user saw); the gateway's own status stream does not.
// Bytes are the HTTP bodies this gateway forwarded; a WebSocket's bytes
// after its 101 go to the counters when it closes (upgrade.go).
func (g *Gateway) record(sandbox string, counted bool, r *http.Request, sw *statusWriter, status int, took time.Duration, t *table) {
	if sandbox == "" || !counted {
		return
	}
	g.traffic.Record(sandbox, r.Method, r.URL.Path, status, took, sw.body.n.Load(), sw.written, wire.ClientIP(r, t.cfg.TrustedProxies))
}
