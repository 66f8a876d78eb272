package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keysDir holds the test keys (testdata/keys/README.md at the module
// root).
var keysDir, _ = filepath.Abs(filepath.Join("..", "..", "testdata", "keys"))

// TestConfigValidateReadsFiles: config validate reads the key and
// certificate files a config names, as serve does, and says at the
// naming key what serve would refuse (a file it cannot read, a key that
// does not fit its alg), instead of "ok" for a config serve then refuses.
func TestConfigValidateReadsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.pem")
	key := func(pub, priv string) string {
		return fmt.Sprintf("auth:\n  keys:\n    - kid: k1\n      alg: ES256\n      public_key_file: %q\n      private_key_file: %q\n", pub, priv)
	}
	ec, ecKey, rsa := filepath.Join(keysDir, "ec.pub"), filepath.Join(keysDir, "ec.key"), filepath.Join(keysDir, "rsa.pub")
	const hs = "auth:\n  keys: [{kid: k1, alg: HS256, secret: \"0123456789abcdef0123456789abcdef\"}]\n"
	for _, tc := range []struct {
		name, body, want string // want: the one error line after FILE: (its start), "" for ok
	}{
		{"keys that load", key(ec, ecKey), ""},
		{"public key missing", key(missing, ecKey), `:6:24: auth.keys[0].public_key_file: public key: open ` + missing + `: no such file or directory`},
		{"a key of another alg", key(rsa, ""), `:6:24: auth.keys[0].public_key_file: ES256 needs an ECDSA key, got *rsa.PublicKey`},
		{"certificate missing", hs + fmt.Sprintf("tls: {mode: files, cert_file: %q, key_file: %q}\n", missing, ecKey),
			`:4:31: tls.cert_file: read cert: open ` + missing + `: no such file or directory`},
		{"not a pair", hs + fmt.Sprintf("tls: {mode: files, cert_file: %q, key_file: %q}\n", ec, ecKey),
			`:4:31: tls.cert_file: load ` + ec + ` and ` + ecKey + `: tls: `},
		{"ACME root missing", hs + fmt.Sprintf("tls: {mode: acme, acme: {email: a@example.com, ca_root: %q}}\n", missing),
			`:4:57: tls.acme.ca_root: ca_root: open ` + missing + `: no such file or directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			domain := "domain: preview.localhost\n"
			if strings.Contains(tc.body, "acme") {
				domain = "domain: preview.example.com\n"
			}
			os.WriteFile(path, []byte(domain+tc.body+"templates:\n  app: {image: app:1}\n"), 0o600)
			var out, errb bytes.Buffer
			code := run([]string{"config", "validate", path}, &out, &errb)
			if tc.want == "" {
				if code != 0 || out.String() != path+": ok\n" {
					t.Fatalf("exit %d, stdout %q, stderr %q; want ok", code, out.String(), errb.String())
				}
				return
			}
			if code != 1 || !strings.HasPrefix(errb.String(), path+tc.want) || strings.Count(errb.String(), "\n") != 1 {
				t.Fatalf("exit %d, stderr\n%q\nwant 1 and one line starting\n%q", code, errb.String(), path+tc.want)
			}
		})
	}

	// A private key beside a public one is token mint's alone: one that
	// does not load is a warning, never a refusal (a gateway need not
	// hold the key that mints).
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("domain: preview.localhost\n"+key(ec, missing)+"templates:\n  app: {image: app:1}\n"), 0o600)
	var out, errb bytes.Buffer
	want := path + ":7:25: warning: auth.keys[0].private_key_file: private key: open " + missing + ": no such file or directory"
	if code := run([]string{"config", "validate", path}, &out, &errb); code != 0 || !strings.Contains(errb.String(), want) {
		t.Errorf("private key missing: exit %d, stderr %q; want 0 and %q", code, errb.String(), want)
	}
}

// TestConfigValidateHidesExpandedFilePaths: a file path that came from
// ${VAR} is named by its variable, never its value, when the file is a
// problem, as every other config error does (config/expand.go): such a
// variable may hold the key itself, pasted in place of a path, and the
// admin API shows these errors to whoever sent the text, a failed reload
// logs them. The value was printed whole ("open <key>: no such file").
func TestConfigValidateHidesExpandedFilePaths(t *testing.T) {
	const pasted = "MC4CAQAwBQYDK2VwBCIEIPastedPrivateKeyNotAPath0123456789" // a key body, not a path
	t.Setenv("PG_TEST_PRIVATE_KEY", pasted)
	path := filepath.Join(t.TempDir(), "c.yaml")
	body := "domain: preview.localhost\nauth:\n  keys:\n    - kid: k1\n      alg: ES256\n" +
		"      public_key_file: ${PG_TEST_PRIVATE_KEY}\ntemplates:\n  app: {image: app:1}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"config", "validate", path}, &out, &errb)
	want := path + ":6:24: auth.keys[0].public_key_file: public key: open ${PG_TEST_PRIVATE_KEY} (its value not shown): no such file or directory"
	if code != 1 || strings.Contains(errb.String(), "PastedPrivateKey") || !strings.Contains(errb.String(), want) {
		t.Fatalf("exit %d, stderr\n%s\nwant 1, no trace of the variable's value, and\n%s", code, errb.String(), want)
	}
}
