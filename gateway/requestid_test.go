package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestRequestIDFromTrustedProxiesOnly: a client's X-Request-Id becomes
// the request's id (the app's, the client's answer's, the logs') only
// when the peer is one of trusted_proxies; from anybody else, the gateway
// makes its own, on both front ends. A client must not choose the id the
// operator searches the logs by, nor send a real one of another request
// again.
func TestRequestIDFromTrustedProxiesOnly(t *testing.T) {
	t.Parallel()
	app := echoApp(t)
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		kept    bool
	}{
		{"no trusted proxies", nil, false},
		{"peer not trusted", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, false},
		{"peer trusted", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onBothLoops(t, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}},
				func(c *config.Config) { c.TrustedProxies = tc.trusted },
				func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
					tok := testkit.Mint(t, cfg, "abc", time.Minute)
					resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok,
						"X-Request-Id", "forged-by-client")
					var got struct{ Headers map[string][]string }
					if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
						t.Fatal(err)
					}
					seen, answered := got.Headers["X-Request-Id"], resp.Header["X-Request-Id"]
					if len(seen) != 1 || len(answered) != 1 || seen[0] != answered[0] {
						t.Fatalf("the app saw X-Request-Id %q, the client got %q: want one id, the same", seen, answered)
					}
					if kept := seen[0] == "forged-by-client"; kept != tc.kept {
						t.Fatalf("X-Request-Id %q, want the client's kept: %v", seen[0], tc.kept)
					}
				})
		})
	}
}
