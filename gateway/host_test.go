package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

func TestHostRouting(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	app := echoApp(t)
	tok := testkit.Mint(t, cfg, "*", time.Minute)
	tests := []struct {
		name string
		host string
		want int
	}{
		{"sandbox host", "sandbox-abc." + testDomain, 200},
		{"sandbox host with port", "sandbox-abc." + testDomain + ":8080", 200},
		{"upper case host", "SANDBOX-ABC.PREVIEW.TEST", 200},
		{"trailing dot", "sandbox-abc." + testDomain + ".", 200},
		{"foreign host", "evil.example", 404},
		{"bare domain", testDomain, 404},
		{"suffix trick", "sandbox-abc.evilpreview.test", 404},
		{"nested label", "x.sandbox-abc." + testDomain, 404},
		{"no prefix", "abc." + testDomain, 404},
		{"empty id", "sandbox-." + testDomain, 400},
		{"underscore", "sandbox-a_b." + testDomain, 400},
		{"leading hyphen", "sandbox--ab." + testDomain, 400},
		{"trailing hyphen", "sandbox-ab-." + testDomain, 400},
		{"too long", "sandbox-" + strings.Repeat("a", 56) + "." + testDomain, 400},
		// The port of the Host is never used, but a host whose port is
		// no port is no URL anybody was given: it is refused, not served.
		{"port 1", "sandbox-abc." + testDomain + ":1", 200},
		{"port 65535", "sandbox-abc." + testDomain + ":65535", 200},
		{"port not a number", "sandbox-abc." + testDomain + ":abc", 400},
		{"port too big", "sandbox-abc." + testDomain + ":99999", 400},
		{"port 65536", "sandbox-abc." + testDomain + ":65536", 400},
		{"port 0", "sandbox-abc." + testDomain + ":0", 400},
		{"port with a leading zero", "sandbox-abc." + testDomain + ":080", 400},
		{"port empty", "sandbox-abc." + testDomain + ":", 400},
		{"port signed", "sandbox-abc." + testDomain + ":+80", 400},
		{"port host with a bad port", "3001-sandbox-abc." + testDomain + ":abc", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb := &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}
			_, srv := startGateway(t, cfg, sb)
			resp := testkit.Request(t, srv, "GET", tc.host, "/", tok)
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want != 200 && sb.ensures.Load()+sb.lookups.Load() != 0 {
				t.Fatalf("got %d Ensure and %d lookup calls for a rejected host, want 0", sb.ensures.Load(), sb.lookups.Load())
			}
		})
	}
}

func TestServes(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Routes = []config.Route{{Host: "docs.example.test", Upstream: "http://127.0.0.1:1"}}
	g, err := New(cfg, fakes(&fakeSandboxes{}), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for host, want := range map[string]bool{
		"sandbox-abc." + testDomain: true, "docs.example.test": true, "DOCS.example.test": true,
		"evil.example": false, "sandbox-Bad_." + testDomain: false, testDomain: false,
		"x.sandbox-abc." + testDomain: false, "sandbox-\u212abc." + testDomain: false,
		"8000-sandbox-abc." + testDomain: true, "8000-sandbox-abc." + testDomain + ":443": true,
		"0-sandbox-abc." + testDomain: false, "8000-abc." + testDomain: false,
		"8000-sandbox-" + strings.Repeat("a", 51) + "." + testDomain: false,
	} {
		if got := g.Serves(host); got != want {
			t.Errorf("Serves(%q): got %v, want %v", host, got, want)
		}
	}
}

// FuzzServes: host parsing never panics, and whatever it accepts is a route
// host or sandbox-<valid id>.<domain>.
func FuzzServes(f *testing.F) {
	for _, s := range []string{"sandbox-abc." + testDomain, "docs.example.test:443", "[::1]:80", "sandbox-." + testDomain,
		"SANDBOX-A." + testDomain + ".", "sandbox-a.b." + testDomain, ":", "", "\u212a"} {
		f.Add(s)
	}
	cfg := testConfig()
	cfg.Routes = []config.Route{{Host: "docs.example.test", Upstream: "http://127.0.0.1:1"}}
	g, err := New(cfg, fakes(&fakeSandboxes{}), Options{}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !g.Serves(host) {
			return
		}
		h := hostname(host)
		if h == "docs.example.test" {
			return
		}
		label, ok := strings.CutSuffix(h, "."+testDomain)
		if digits, rest, cut := strings.Cut(label, "-"); cut && digits != "" && strings.Trim(digits, "0123456789") == "" {
			label = rest // a port host: <port>-sandbox-<id> (#22)
			ok = ok && len(digits)+1+len(rest) <= config.MaxLabelLen
		}
		id, ok2 := strings.CutPrefix(label, config.SandboxPrefix)
		if !ok || !ok2 || !config.ValidID(id) {
			t.Fatalf("Serves(%q) accepted %q", host, h)
		}
	})
}

// TestHostOnly: resolve's hostOnly of the normalized host is hostname of
// the raw one.
func TestHostOnly(t *testing.T) {
	for _, h := range []string{"Sandbox-ABC.example.com", "sandbox-abc.example.com.", "sandbox-abc.example.com.:8443",
		"sandbox-abc.example.com..", "[::1]:80", "[::1]", "Host:80", "host.", "h:", ":80", "a.b.:", "[fe80::1%25eth0]:443"} {
		n, ok := config.NormalizeHost(h)
		if !ok {
			t.Fatalf("%q: not normalized", h)
		}
		if got, want := hostOnly(n), hostname(h); got != want {
			t.Errorf("hostOnly(NormalizeHost(%q)) = %q, hostname = %q", h, got, want)
		}
	}
}
