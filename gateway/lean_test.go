package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestLeanRequestLeavesStreams: streams are not the lean loop's. The
// gateway leaves SSE and its own status endpoint (however its path is
// spelled) to net/http, which notices a client leaving; a plain request to
// the same running sandbox is lean.
func TestLeanRequestLeavesStreams(t *testing.T) {
	cfg := testConfig()
	g, err := New(cfg, fakes(&fakeSandboxes{addrs: []string{"127.0.0.1:1"}}), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	for _, tc := range []struct {
		name, target, accept string
		want                 bool
	}{
		{"plain", "/app.js", "*/*", true},
		{"event stream", "/events", "text/event-stream", false},
		{"status endpoint", "/__previewgate/status", "*/*", false},
		{"status endpoint, escaped slash", "/__previewgate%2Fstatus", "*/*", false},
	} {
		r := httptest.NewRequest("GET", "http://sandbox-abc."+testDomain+tc.target, nil)
		r.Header.Set("Accept", tc.accept)
		r.Header.Set("Authorization", "Bearer "+tok)
		if got := g.leanRequest(r, new(any)); got != tc.want {
			t.Errorf("%s: leanRequest = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// onBothLoops runs f as two subtests, lean=true and lean=false, each with
// a gateway of its own (testConfig, changed by edit unless it is nil) in
// front of sb, served with the lean loop and by net/http alone.
func onBothLoops(t *testing.T, sb any, edit func(*config.Config), f func(t *testing.T, cfg *config.Config, srv *httptest.Server)) {
	for _, lean := range []bool{true, false} {
		t.Run(fmt.Sprintf("lean=%v", lean), func(t *testing.T) {
			cfg := testConfig()
			if edit != nil {
				edit(cfg)
			}
			g, err := New(cfg, fakes(sb), Options{}, testkit.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			var h http.Handler = g
			if !lean {
				h = http.HandlerFunc(g.ServeHTTP) // hides the lean hook from the Server
			}
			f(t, cfg, serve(t, NewServer(cfg, h, testkit.Logger(t))))
		})
	}
}
