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
// made-up well-formed id is not (#24, 7).
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
		{"evil.example", false},
	} {
		if got := g.WorthCertificate(tc.host); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.host, got, tc.want)
		}
	}
}
