package gateway

import (
	"testing"

	"github.com/previewgate/previewgate/config"
)

// knownSandboxes knows sandbox "exists" only.
type knownSandboxes struct{ *fakeSandboxes }

func (knownSandboxes) Known(id string) (string, bool) { return "app", id == "exists" }

// TestWorthCertificate: only a route's host, a sandbox that exists, or an
// id announced through the API is worth an on-demand certificate; a
// made-up well-formed id is not (#24, 7), nor a port address for a port
// no template exposes.
func TestWorthCertificate(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Routes = []config.Route{{Host: "docs.example.org", Sandbox: "docs"}}
	g, _ := startGateway(t, cfg, knownSandboxes{&fakeSandboxes{}})
	if g.Announce("Bad_Id") {
		t.Error("Announce accepted a malformed id")
	}
	g.Announce("announced")
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"docs.example.org", true},
		{"sandbox-exists." + testDomain, true},
		{"3000-sandbox-exists." + testDomain, true},
		{"sandbox-announced." + testDomain, true},
		{"sandbox-madeup." + testDomain, false},
		{"3000-sandbox-madeup." + testDomain, false},
		// A port its template does not expose answers 404 unknown_port:
		// 65535 such names of one known sandbox must not each order a
		// certificate (hostile5).
		{"3001-sandbox-exists." + testDomain, false},
		{"65535-sandbox-exists." + testDomain, false},
		{"3000-sandbox-announced." + testDomain, true},
		{"1-sandbox-announced." + testDomain, false},
		{"evil.example", false},
	} {
		if got := g.WorthCertificate(tc.host); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.host, got, tc.want)
		}
	}
}
