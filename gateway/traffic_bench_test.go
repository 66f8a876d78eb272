package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/traffic"
)

// BenchmarkHandlerChainTraffic is BenchmarkHandlerChain without and with
// the per-sandbox request log (#23): the difference is what recording
// costs a request (allocations should not change).
func BenchmarkHandlerChainTraffic(b *testing.B) {
	for _, tc := range []struct {
		name string
		rec  Traffic
	}{{"off", nil}, {"on", traffic.New(traffic.Options{})}} {
		b.Run(tc.name, func(b *testing.B) {
			body := strings.Repeat("x", 1024)
			app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
			defer app.Close()
			cfg := testConfig()
			g, err := New(cfg, fakes(&fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}), Options{Traffic: tc.rec}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			req := httptest.NewRequest("GET", "http://sandbox-abc."+testDomain+"/assets/app.js", nil)
			req.Header.Set("Cookie", auth.DefaultCookieName+"="+testkit.Mint(b, cfg, "abc", time.Hour))
			req.RemoteAddr = "127.0.0.1:40000"
			w := &discardWriter{h: http.Header{}}
			for range traffic.DefaultRing + 1 {
				g.ServeHTTP(w, req) // warm the token cache, the pool and the ring
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				clear(w.h)
				delete(req.Header, "X-Request-Id") // the gateway set it: each request is a fresh one
				g.ServeHTTP(w, req)
			}
		})
	}
}
