package gateway

import (
	"net/http/httptest"
	"testing"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestLeanShape: streams are not the lean loop's. The gateway leaves SSE
// and its own status endpoint (however its path is spelled) to net/http,
// which notices a client leaving; anything else is the lean loop's,
// whatever it is for (ServeHTTP decides that, on either loop).
func TestLeanShape(t *testing.T) {
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
		if got := leanShape(r); got != tc.want {
			t.Errorf("%s: leanShape = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// frontEnds are the gateway's two HTTP/1.1 front ends: the lean loop and
// net/http alone (Options.NetHTTPOnly). Behaviour tests run on both as
// subtests.
var frontEnds = []struct {
	name        string
	netHTTPOnly bool
}{{"lean", false}, {"nethttp", true}}

// onBothLoops runs f as two subtests, one per front end (frontEnds),
// each with a gateway of its own (testConfig, changed by edit unless it
// is nil) in front of sb (a Sandboxes or a perID fake: fakes).
func onBothLoops(t *testing.T, sb any, edit func(*config.Config), f func(t *testing.T, cfg *config.Config, srv *httptest.Server)) {
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			cfg := testConfig()
			if edit != nil {
				edit(cfg)
			}
			g, err := New(cfg, fakes(sb), Options{NetHTTPOnly: fe.netHTTPOnly}, testkit.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			f(t, cfg, serve(t, NewServer(cfg, g, testkit.Logger(t))))
		})
	}
}
