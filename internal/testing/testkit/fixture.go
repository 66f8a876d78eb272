package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
)

// What ConfigFile writes, for tests to compare with.
const (
	Domain     = "preview.test"
	AdminToken = "admin-token-for-tests-0123456789"
	Secret     = "0123456789abcdef0123456789abcdef" // HS256 key k1
)

// ConfigFile renders a config file for Domain with AdminToken, one HS256
// key k1 (Secret) for issuer test and audience previewgate, and the
// default template app (image testapp), whose routes send each host to an
// upstream. Previews are plain HTTP on a real-looking domain, so the file
// names a TLS-terminating proxy (trusted_proxies, a range no test peer is
// in) as validation requires (#24, 1).
func ConfigFile(routes map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `domain: %s
admin_token: %s
auth:
  audience: previewgate
  issuers: [test]
  keys: [{kid: k1, alg: HS256, secret: %q}]
default_template: app
templates:
  app: {image: testapp}
trusted_proxies: [192.0.2.0/24]
`, Domain, AdminToken, Secret)
	if len(routes) > 0 {
		b.WriteString("routes:\n")
		for host, up := range routes {
			fmt.Fprintf(&b, "  - {host: %s, upstream: %q}\n", host, up)
		}
	}
	return b.String()
}

// MinTTL is the shortest lifetime Mint gives a token. A test on a loaded
// machine can take minutes between minting a token and its last use, and
// a token that expires there fails a test about something else. A test
// about expiry mints with auth.Mint and its own clock (MintOptions.Now).
const MinTTL = time.Hour

// Mint returns a token for sandbox ("*": any), signed with cfg's first key
// by issuer test for cfg's audience, valid for ttl but at least MinTTL.
func Mint(t testing.TB, cfg *config.Config, sandbox string, ttl time.Duration) string {
	t.Helper()
	tok, err := auth.Mint(cfg.Auth.Keys[0], auth.MintOptions{Subject: "tester", Sandbox: sandbox,
		Issuer: "test", Audience: cfg.Auth.Audience, TTL: max(ttl, MinTTL)})
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	return tok
}

// WriteConfig writes content as previewgate.yaml in a directory of the
// test's own, loads it, and returns the file's path and the config.
func WriteConfig(t testing.TB, content string) (string, *config.Config) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "previewgate.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, cfg
}
