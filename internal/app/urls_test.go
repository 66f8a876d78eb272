package app

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/config"
)

// TestPrintListeners: the start output names every listener's URL, the
// admin page at /ui/ included (#24, 5).
func TestPrintListeners(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  func(*config.Config)
		want []string
		not  []string
	}{
		{"development default", func(*config.Config) {}, []string{
			"http://sandbox-<id>.localhost:8080/", "Admin page: http://127.0.0.1:9090/ui/", "http://127.0.0.1:9090/healthz",
			"Admin API:  http://127.0.0.1:9090/admin/sandboxes ",
		}, []string{"https://", "Metrics:", "/admin/ "}},
		{"tls on default ports, metrics", func(c *config.Config) {
			c.Domains = config.StringList{"preview.example.com"}
			c.TLS.Mode = config.TLSACME
			c.Listen = config.Listen{HTTP: ":80", HTTPS: ":443", Admin: ":9090", Metrics: "10.0.0.1:9091"}
		}, []string{
			"https://sandbox-<id>.preview.example.com/", "http://127.0.0.1 answers ACME", "Admin page: http://127.0.0.1:9090/ui/",
			"Metrics:    http://10.0.0.1:9091/metrics",
		}, nil},
		// No ACME: the http listener only redirects (it said it answered
		// ACME challenges in every TLS mode).
		{"self-signed", func(c *config.Config) {
			c.TLS.Mode = config.TLSSelfSigned
			c.Listen = config.Listen{HTTP: "127.0.0.1:8080", HTTPS: "127.0.0.1:8443", Admin: "127.0.0.1:9090"}
		}, []string{"http://127.0.0.1:8080 redirects to https"}, []string{"ACME"}},
		// deploy/kubernetes: TLS ends at the ingress; the pod listens on
		// :8080, which is not where a browser opens the preview.
		{"tls off behind a proxy", func(c *config.Config) {
			c.Domains = config.StringList{"preview.example.com"}
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
			c.Listen = config.Listen{HTTP: ":8080", Admin: ":9090"}
		}, []string{
			"Previews:   https://sandbox-<id>.preview.example.com/ ", "through the TLS proxy in front, to http://127.0.0.1:8080 here",
		}, []string{"preview.example.com:8080"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := config.Default()
			tc.cfg(c)
			var b bytes.Buffer
			printListeners(&b, c)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("got %q, want it to contain %q", b.String(), w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("got %q, want no %q", b.String(), w)
				}
			}
		})
	}
}
