package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// writeCertPair writes a self-signed certificate for preview.localhost
// and its key into dir.
func writeCertPair(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "preview.localhost"},
		DNSNames: []string{"preview.localhost", "*.preview.localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "cert.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestConfigPutChecksTheFilesItsTextNames: a PUT (or reload) checks the
// certificate files its text names, as config validate and serve's start
// do, not those the gateway runs with. The check used to run after the
// running values of the restart-only tls settings were kept in the new
// config, so a PUT naming a certificate that does not exist was applied
// (restart_needed tls.cert_file: the gateway then refused to start), and
// once the running certificate was moved every PUT was refused, even the
// one naming where it went.
func TestConfigPutChecksTheFilesItsTextNames(t *testing.T) {
	dockertest.Client(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	certFile, keyFile := writeCertPair(t, dir)
	httpAddr, httpsAddr, adminAddr := freePort(t), freePort(t), freePort(t)
	conf := func(cert string, maxRunning int) string {
		return fmt.Sprintf("domain: preview.localhost\nlisten: {http: %q, https: %q, admin: %q}\ndata_dir: %q\nadmin_token: files-admin-token-0123456789\n"+
			"tls: {mode: files, cert_file: %q, key_file: %q}\n"+
			"auth:\n  keys:\n    - {kid: k1, alg: HS256, secret: \"0123456789abcdef0123456789abcdef\"}\n"+
			"limits: {max_running: %d}\ntemplates:\n  app: {image: app:1}\n",
			httpAddr, httpsAddr, adminAddr, filepath.Join(dir, "data"), cert, keyFile, maxRunning)
	}
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte(conf(certFile, 5)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, bin, append([]string{"serve", "--config", file}, labelArgs()...)...)
	p.waitFor(t, p.stderr, regexp.MustCompile(`previewgate serving`))
	call := func(method, path, body string) (int, string) {
		t.Helper()
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

	// A certificate that does not exist: refused as validate refuses it,
	// the file left as it is.
	missing := filepath.Join(dir, "nope.pem")
	want := "tls.cert_file: read cert: open " + missing + ": no such file or directory"
	for _, method := range []string{"POST", "PUT"} {
		path := map[string]string{"POST": "/admin/config/validate", "PUT": "/admin/config"}[method]
		code, body := call(method, path, conf(missing, 6))
		if code != http.StatusBadRequest || !strings.Contains(body, `"invalid_config"`) || !strings.Contains(body, want) {
			t.Errorf("%s %s naming a missing certificate: got %d %s; want 400 invalid_config with %q", method, path, code, body, want)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != conf(certFile, 5) {
		t.Errorf("a refused PUT changed the file:\n%s", b)
	}

	// The certificate moved (the gateway holds it): a PUT naming where it
	// is now applies, its tls change waiting for the restart.
	moved := filepath.Join(dir, "moved.pem")
	if err := os.Rename(certFile, moved); err != nil {
		t.Fatal(err)
	}
	code, body := call("PUT", "/admin/config", conf(moved, 7))
	if code != http.StatusOK || !strings.Contains(body, `"tls.cert_file"`) {
		t.Fatalf("PUT naming the moved certificate: got %d %s; want 200, restart_needed tls.cert_file", code, body)
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
