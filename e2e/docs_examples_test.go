package e2e

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// debianNodePath is where Debian's node-jose installs jose.
const debianNodePath = "/usr/share/nodejs"

// TestDocsTokenExamples runs docs/auth.md's Node and Python token examples
// exactly as written (Debian's node-jose and python3-jwt, as .ci/run
// installs them) and opens the sandbox with every token they print on a
// running gateway (issue 16, done-means 4). A token naming a template the
// config lacks gets the README's 400 unknown_template.
func TestDocsTokenExamples(t *testing.T) {
	dockertest.Client(t)
	doc, err := os.ReadFile("docs/auth.md")
	if err != nil {
		t.Fatal(err)
	}
	jsCode, pyCode := codeBlock(t, "docs/auth.md", doc, "js"), codeBlock(t, "docs/auth.md", doc, "python")
	// The examples sign for sandbox abc123; the test's gateway serves a
	// sandbox of this run's own instead, since container names are one
	// namespace per engine: a developer's gateway following the same docs
	// on this engine holds previewgate-abc123 (seen in CI: 409
	// foreign_container on every token).
	id := "docs-" + dockertest.RunID()
	jsCode, pyCode = sandboxIn(t, jsCode, id), sandboxIn(t, pyCode, id)
	python := findPython(t)
	node := findNode(t)

	// What the examples expect around them: the HS256 secret in the
	// environment, the Ed25519 key as a PKCS#8 PEM in the environment
	// (Node) and in ./k2.key (Python).
	dir := t.TempDir()
	const secret = "docs-example-secret-docs-example-secret"
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	privDER, _ := x509.MarshalPKCS8PrivateKey(priv)
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})
	os.WriteFile(filepath.Join(dir, "k2.key"), privPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "k2.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600)
	os.WriteFile(filepath.Join(dir, "example.js"), jsCode, 0o600)
	os.WriteFile(filepath.Join(dir, "example.py"), pyCode, 0o600)
	env := append(os.Environ(), "PREVIEWGATE_JWT_SECRET="+secret, "PREVIEWGATE_ED25519_PKCS8_PEM="+string(privPEM),
		"NODE_PATH="+strings.Trim(os.Getenv("NODE_PATH")+":"+debianNodePath, ":"))

	var tokens []string
	for _, ex := range []struct{ name, bin, file string }{{"node", node, "example.js"}, {"python", python, "example.py"}} {
		cmd := exec.Command(ex.bin, ex.file)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("docs/auth.md's %s example: %v\n%s", ex.name, err, stderr)
		}
		lines := strings.Fields(string(out))
		if len(lines) != 2 {
			t.Fatalf("docs/auth.md's %s example printed %q, want two tokens", ex.name, out)
		}
		tokens = append(tokens, lines...)
	}

	// A gateway with the config the examples sign for.
	bin := buildBinary(t)
	httpAddr, adminAddr := freePort(t), freePort(t)
	cfgFile := filepath.Join(dir, "previewgate.yaml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`domain: preview.localhost
listen: {http: %q, admin: %q}
data_dir: %q
docker: {network: %q}
auth:
  audience: previewgate
  issuers: [app-backend]
  keys:
    - {kid: k1, alg: HS256, secret: %q}
    - {kid: k2, alg: EdDSA, public_key_file: %q}
default_template: demo
templates:
  demo: {image: %q, ready: {path: /, timeout: 30s}}
`, httpAddr, adminAddr, filepath.Join(dir, "data"), dockertest.Network(t), secret, filepath.Join(dir, "k2.pub"), dockertest.TestAppImage(t))), 0o600)
	p := startProc(t, bin, append([]string{"serve", "--config", cfgFile}, labelArgs()...)...)
	p.waitFor(t, p.stderr, regexp.MustCompile(`previewgate serving`))

	host := "sandbox-" + id + ".preview.localhost"
	for i, tok := range tokens {
		if code, body := bearerGet(t, httpAddr, host, tok); code != 200 {
			t.Errorf("token %d of the examples (%s): got %d %.200q, want 200", i, []string{"node HS256", "node EdDSA", "python HS256", "python EdDSA"}[i], code, body)
		}
	}

	wrong, err := auth.Mint(config.Key{KID: "k1", Alg: "HS256", Secret: secret}, auth.MintOptions{Subject: "user-42",
		Sandbox: id, Template: "nextjs", Issuer: "app-backend", Audience: "previewgate", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	code, body := bearerGet(t, httpAddr, host, wrong)
	var e struct{ Code string }
	json.Unmarshal(body, &e)
	if code != http.StatusBadRequest || e.Code != "unknown_template" {
		t.Errorf("tpl naming no template: got %d %q, want 400 unknown_template", code, body)
	}
}

// sandboxIn returns an example's code signing for sandbox id instead of
// the docs' abc123.
func sandboxIn(t *testing.T, code []byte, id string) []byte {
	t.Helper()
	if !bytes.Contains(code, []byte(`"abc123"`)) {
		t.Fatalf("the example no longer signs for \"abc123\":\n%s", code)
	}
	return bytes.ReplaceAll(code, []byte(`"abc123"`), []byte(strconv.Quote(id)))
}

// codeBlock returns the one fenced block of lang in doc (file name).
func codeBlock(t *testing.T, name string, doc []byte, lang string) []byte {
	t.Helper()
	m := fencedBlocks(doc, lang)
	if len(m) != 1 {
		t.Fatalf("%s: got %d ```%s blocks, want 1", name, len(m), lang)
	}
	return m[0]
}

// fencedBlocks returns doc's fenced blocks of lang.
func fencedBlocks(doc []byte, lang string) [][]byte {
	re := regexp.MustCompile("(?ms)^```" + regexp.QuoteMeta(lang) + "\n(.*?)^```")
	var out [][]byte
	for _, m := range re.FindAllSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// findPython returns a python3 that can import PyJWT with cryptography:
// the one on PATH, else Debian's (a pyenv or venv python on PATH does not
// see Debian's python3-jwt).
func findPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import jwt, cryptography").Run() == nil {
			return path
		}
	}
	t.Fatal("no python3 with PyJWT and cryptography: install Debian's python3-jwt and python3-cryptography (.ci/run does), or pip install 'pyjwt[crypto]'")
	return ""
}

// findNode returns node if it can load jose (Debian's node-jose, or an
// npm install on NODE_PATH).
func findNode(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("no node on PATH: install Debian's nodejs and node-jose (.ci/run does)")
	}
	cmd := exec.Command(path, "-e", `require("jose")`)
	cmd.Env = append(os.Environ(), "NODE_PATH="+strings.Trim(os.Getenv("NODE_PATH")+":"+debianNodePath, ":"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node cannot load jose: install Debian's node-jose (.ci/run does): %v\n%.300s", err, out)
	}
	return path
}

func bearerGet(t *testing.T, addr, host, tok string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = host
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}
