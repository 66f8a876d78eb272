package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInvokedAs: hints name the command as the user ran it (#24, 5).
func TestInvokedAs(t *testing.T) {
	old := argv0
	t.Cleanup(func() { argv0 = old })
	for _, tc := range []struct{ argv0, want string }{
		{"previewgate", "previewgate"},
		{"./previewgate", "./previewgate"},
		{"/usr/local/bin/previewgate", "/usr/local/bin/previewgate"},
		{"/tmp/go-build1234/b001/exe/previewgate", "go run ."},
		{"", "previewgate"},
	} {
		argv0 = tc.argv0
		if got := invokedAs(); got != tc.want {
			t.Errorf("argv0 %q: got %q, want %q", tc.argv0, got, tc.want)
		}
	}
}

// TestTokenMintURL: token mint prints the preview URL to open: beside the
// bare token on stderr by default (stdout stays the token for scripts),
// alone on stdout with --url (#24, 5).
func TestTokenMintURL(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(`domain: preview.localhost
listen: {http: "127.0.0.1:8081"}
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  web: {image: nginx}
`), 0o600)
	const want = "http://sandbox-abc.preview.localhost:8081/?access_token="
	var out, errb bytes.Buffer
	if code := run([]string{"token", "mint", "--config", cfg, "--sandbox", "abc"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	tok := strings.TrimSpace(out.String())
	if strings.Contains(tok, "\n") || strings.Count(tok, ".") != 2 {
		t.Errorf("stdout %q, want the bare token", out.String())
	}
	if !strings.Contains(errb.String(), "open: "+want+tok) {
		t.Errorf("stderr %q, want %q", errb.String(), want+tok)
	}
	out.Reset()
	if code := run([]string{"token", "mint", "--config", cfg, "--sandbox", "abc", "--url"}, &out, &errb); code != 0 {
		t.Fatalf("--url: exit %d: %s", code, errb.String())
	}
	if got := strings.TrimSpace(out.String()); !strings.HasPrefix(got, want) || strings.Contains(got, "\n") {
		t.Errorf("--url: got %q, want one line starting %q", got, want)
	}

	// TLS off on a real domain: TLS ends at the proxy in front (validation
	// requires trusted_proxies), so the URL is https on its port, not
	// listen.http's behind it (docs/kubernetes.md: open https://...).
	proxied := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(proxied, []byte(`domain: preview.example.com
listen: {http: ":8080"}
trusted_proxies: [10.0.0.0/8]
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  web: {image: nginx}
`), 0o600)
	out.Reset()
	if code := run([]string{"token", "mint", "--config", proxied, "--sandbox", "abc", "--url"}, &out, &errb); code != 0 {
		t.Fatalf("behind a proxy: exit %d: %s", code, errb.String())
	}
	if got, want := out.String(), "https://sandbox-abc.preview.example.com/?access_token="; !strings.HasPrefix(got, want) {
		t.Errorf("behind a proxy: got %q, want %q...", got, want)
	}
}

// TestServeDomainFlagChecked: --domain replaces the domain after the file
// (or the development default) was validated, so serve checks it again: a
// real domain over plain HTTP is refused with the reason (#24, 1).
func TestServeDomainFlagChecked(t *testing.T) {
	t.Chdir(t.TempDir()) // the development default keeps its data dir here
	var out, errb bytes.Buffer
	code := run([]string{"serve", "--domain", "preview.internal", "--http", "127.0.0.1:1", "--admin", "127.0.0.1:2"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "Secure cookie") || !strings.Contains(errb.String(), "trusted_proxies") {
		t.Errorf("got exit %d, stderr %q; want a refusal naming the Secure cookie and the ways out", code, errb.String())
	}
}
