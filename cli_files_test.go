package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// keysDir holds the test keys (testdata/keys/README.md).
var keysDir, _ = filepath.Abs(filepath.Join("testdata", "keys"))

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

// TestServeChecksFilesAsValidateDoes: serve refuses a config whose key
// file is missing with the error config validate gives, and the config
// API's validate answers 400 invalid_config for it where it said valid;
// PUT refuses it as invalid too, at its position, and the file stays.
func TestServeChecksFilesAsValidateDoes(t *testing.T) {
	dockertest.Client(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "k2.pub")
	adminAddr := freePort(t)
	head := fmt.Sprintf("domain: preview.localhost\nlisten: {http: %q, admin: %q}\ndata_dir: %q\nadmin_token: files-admin-token-0123456789\n",
		freePort(t), adminAddr, filepath.Join(dir, "data"))
	good := head + "auth:\n  keys:\n    - {kid: k1, alg: HS256, secret: \"0123456789abcdef0123456789abcdef\"}\ntemplates:\n  app: {image: app:1}\n"
	bad := strings.Replace(good, "    - {kid: k1", fmt.Sprintf("    - {kid: k2, alg: ES256, public_key_file: %q}\n    - {kid: k1", missing), 1)
	want := ":7:46: auth.keys[0].public_key_file: public key: open " + missing + ": no such file or directory"

	badFile := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badFile, []byte(bad), 0o600)
	p := startProc(t, bin, append([]string{"serve", "--config", badFile}, labelArgs()...)...)
	err := <-p.done
	p.done <- err // for the cleanup
	if err == nil || !strings.Contains(p.stderr.String(), badFile+want) {
		t.Fatalf("serve of a config with a missing key file: %v, stderr %q; want it refused with %q", err, p.stderr.String(), badFile+want)
	}

	goodFile := filepath.Join(dir, "good.yaml")
	os.WriteFile(goodFile, []byte(good), 0o600)
	p = startProc(t, bin, append([]string{"serve", "--config", goodFile}, labelArgs()...)...)
	p.waitFor(t, p.stderr, regexp.MustCompile(`previewgate serving`))
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+adminAddr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer files-admin-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, method := range []string{"POST", "PUT"} {
		path := map[string]string{"POST": "/admin/config/validate", "PUT": "/admin/config"}[method]
		code, body := call(method, path, bad)
		if code != http.StatusBadRequest || !strings.Contains(body, `"invalid_config"`) || !strings.Contains(body, strings.ReplaceAll(want, `"`, `\"`)) {
			t.Errorf("%s %s: got %d %s; want 400 invalid_config with %q", method, path, code, body, want)
		}
	}
	if b, _ := os.ReadFile(goodFile); string(b) != good {
		t.Errorf("the refused PUT changed the file:\n%s", b)
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
