package gateway

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/previewgate/previewgate/internal/meter"
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

// record reports a request for a sandbox, if counted: it passed the
// access check and the limits, so a client without a token cannot fill
// the log (or push sandboxes out of it) with made-up ids. Whatever
// answered it counts (the app, the waiting page, a failed start's 502 or
// 504: what the user saw); the gateway's own status stream does not.
// Bytes are the HTTP bodies this gateway forwarded; a WebSocket's bytes
// after its 101 go to the counters when it closes (upgrade.go).
func (g *Gateway) record(sandbox string, st *reqState, r *http.Request, sw *meter.Writer, status int, took time.Duration, t *table) {
	if sandbox == "" || !st.counted {
		return
	}
	g.traffic.Record(sandbox, r.Method, r.URL.Path, status, took, sw.BodyRead(), sw.Written(), st.addrs.Client(r, t.cfg.TrustedProxies))
}
