package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestConfigValidateCLI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte(`domain: preview.test
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: app:1}
`), 0o600)
	os.WriteFile(bad, []byte(`domain: preview.test
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: app:1, idle_timeout: soon}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"config", "validate", good}, &out, &errb); code != 0 {
		t.Fatalf("valid file: exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"config", "validate", bad}, &out, &errb); code != 1 {
		t.Fatalf("invalid file: exit %d, want 1", code)
	}
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(bad) + `:5:\d+: `).MatchString(errb.String()) {
		t.Fatalf("got %q, want FILE:LINE:COL: message", errb.String())
	}
}

func TestTokenMintCLI(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(`domain: preview.test
auth:
  audience: previewgate
  issuers: [backend]
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: app:1}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"token", "mint", "--config", cfg, "--sandbox", "abc", "--template", "app"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var claims jwt.MapClaims
	tok, err := jwt.ParseWithClaims(strings.TrimSpace(out.String()), &claims, func(*jwt.Token) (any, error) {
		return []byte("0123456789abcdef0123456789abcdef"), nil
	}, jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience("previewgate"), jwt.WithIssuer("backend"))
	if err != nil || !tok.Valid {
		t.Fatalf("minted token does not verify: %v", err)
	}
	if claims["sbx"] != "abc" || claims["tpl"] != "app" || tok.Header["kid"] != "k1" {
		t.Fatalf("got claims %v header %v", claims, tok.Header)
	}
	if code := run([]string{"token", "mint", "--config", cfg, "--sandbox", "Bad_Id"}, &out, &errb); code != 1 {
		t.Fatalf("malformed sandbox id: exit %d, want 1", code)
	}
}
