package config

import (
	"regexp"
	"strings"
	"testing"
)

// TestPlainHTTPOnRealDomain: a config whose previews can only fail in a
// browser is refused at validation, with the reason and the ways out (#24,
// 1): plain HTTP on a real domain drops the Secure cookie; ACME cannot
// certify a localhost name.
func TestPlainHTTPOnRealDomain(t *testing.T) {
	t.Parallel()
	rest := strings.TrimPrefix(base, "domain: preview.localhost\n")
	tests := []struct {
		name string
		yaml string
		want string // "" means valid; else the position and a part of the message
		msgs []string
	}{
		{"real domain, tls off", "domain: preview.internal\n" + rest, "1:9", []string{`"preview.internal" is served over plain http`, "Secure cookie", "set tls.mode", "trusted_proxies"}},
		{"second domain real", "domain: [a.localhost, preview.internal]\n" + rest, "1:23", []string{"domain[1]"}},
		{"tls off explicitly", "domain: preview.internal\n" + rest + "tls: {mode: off}\n", "1:9", []string{"plain http"}},
		{"real domain behind a proxy", "domain: preview.internal\n" + rest + "trusted_proxies: [10.0.0.0/8]\n", "", nil},
		{"real domain, self-signed", "domain: preview.internal\n" + rest + "tls: {mode: self-signed}\n", "", nil},
		{"real domain, files", "domain: preview.internal\n" + rest + "tls: {mode: files, cert_file: c, key_file: k}\n", "", nil},
		{"localhost, tls off", "domain: localhost\n" + rest, "", nil},
		{"sub.localhost, tls off", base, "", nil},
		{"acme on localhost", base + "tls: {mode: acme}\n", "1:9", []string{"cannot get an ACME certificate", "self-signed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse("p.yaml", []byte(tc.yaml), env(nil))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got valid, want an error at %s", tc.want)
			}
			got := err.Error()
			if !strings.HasPrefix(got, "p.yaml:"+tc.want+": ") {
				t.Errorf("got %q, want it at p.yaml:%s", got, tc.want)
			}
			for _, m := range tc.msgs {
				if !strings.Contains(got, m) {
					t.Errorf("got %q, want it to contain %q", got, m)
				}
			}
		})
	}
}

// TestRedactedHidesUnusedHTTPS: with TLS off the admin page's config does
// not show listen.https (":443" read as if previews were on TLS, #24, 5),
// and what it shows parses back.
func TestRedactedHidesUnusedHTTPS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tls  string
		want bool
	}{{"", false}, {"tls: {mode: self-signed}\n", true}} {
		c, err := parse("r.yaml", []byte(base+tc.tls), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Redacted()
		if err != nil {
			t.Fatal(err)
		}
		if got := regexp.MustCompile(`(?m)^\s+https:`).Match(out); got != tc.want {
			t.Errorf("tls %q: shows https %v, want %v:\n%s", tc.tls, got, tc.want, out)
		}
		if _, _, err := parseUpdate("r.yaml", out, c, env(nil)); err != nil {
			t.Errorf("tls %q: redacted does not parse back: %v", tc.tls, err)
		}
	}
}
