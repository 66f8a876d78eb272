package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// TestDocsAPIExamples runs docs/api.md's Go, Node and Python examples
// exactly as written (the Go SDK, adminapi, built by TestMain; Node's
// built-in fetch, Python's standard library) against a
// running gateway with an api_tokens entry of scope sandboxes (#23, done
// means: "examples in curl and in the Node and Python snippets that run in
// CI"). Each creates a sandbox with metadata, finds it by a metadata
// filter and mints a share link; the link then opens the sandbox with no
// other token.
func TestDocsAPIExamples(t *testing.T) {
	dockertest.Client(t)
	if docsErr != nil {
		t.Fatal(docsErr)
	}
	doc, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	jsCode, pyCode := codeBlock(t, "docs/api.md", doc, "js"), codeBlock(t, "docs/api.md", doc, "python")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("no node on PATH: install Debian's nodejs (.ci/run does)")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("no python3 on PATH")
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "example.mjs"), jsCode, 0o600)
	os.WriteFile(filepath.Join(dir, "example.py"), pyCode, 0o600)

	const apiToken = "docs-api-example-token-0123456789"
	bin := buildBinary(t)
	httpAddr, adminAddr := freePort(t), freePort(t)
	cfgFile := filepath.Join(dir, "previewgate.yaml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`domain: preview.localhost
listen: {http: %q, admin: %q}
data_dir: %q
docker: {network: %q}
admin_token: docs-api-admin-token-0123456789
api_tokens: [{token: %q, scopes: [sandboxes]}]
auth:
  audience: previewgate
  keys: [{kid: k1, alg: HS256, secret: docs-api-example-secret-0123456789}]
default_template: demo
templates:
  demo: {image: %q, ready: {path: /, timeout: 30s}}
`, httpAddr, adminAddr, filepath.Join(dir, "data"), dockertest.Network(t), apiToken, dockertest.TestAppImage(t))), 0o600)
	p := startProc(t, bin, append([]string{"serve", "--config", cfgFile}, labelArgs()...)...)
	p.waitFor(t, p.stderr, regexp.MustCompile(`previewgate serving`))

	env := append(os.Environ(), "PG=http://"+adminAddr, "PREVIEWGATE_TOKEN="+apiToken)
	var ids []string
	for _, ex := range []struct {
		name string
		argv []string
	}{{"go", []string{docsExample}}, {"node", []string{node, "example.mjs"}}, {"python", []string{python, "example.py"}}} {
		id := dockertest.UniqueID("docs-" + ex.name)
		ids = append(ids, id)
		cmd := exec.Command(ex.argv[0], append(ex.argv[1:], id)...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("docs/api.md's %s example: %v\n%s", ex.name, err, stderr)
		}
		// The ids it found and a link; the Go example then prints the
		// sandbox's output.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) < 2 || ex.name != "go" && len(lines) != 2 {
			t.Fatalf("docs/api.md's %s example printed %q, want the ids it found and a link", ex.name, out)
		}
		for _, want := range ids {
			if !slices.Contains(strings.Split(lines[0], ","), want) {
				t.Errorf("%s example: the metadata filter found %q, want %s among them", ex.name, lines[0], want)
			}
		}
		followLink(t, httpAddr, lines[1], id)
	}
}

// followLink opens a share link as a browser would, through the gateway at
// addr: the link's navigation answers 303 with a cookie, and the cookie
// alone then opens sandbox id.
func followLink(t *testing.T, addr, link, id string) {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || !strings.HasPrefix(u.Host, "sandbox-"+id+".") {
		t.Fatalf("link %q: not a preview address of %s (%v)", link, id, err)
	}
	client := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, cookies []*http.Cookie) *http.Response {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Host = u.Hostname()
		for _, c := range cookies {
			req.AddCookie(c)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	first := get(u.RequestURI(), nil)
	if first.StatusCode != http.StatusSeeOther || len(first.Cookies()) == 0 {
		t.Fatalf("opening the link: got %d with %d cookies, want 303 with the link's cookie", first.StatusCode, len(first.Cookies()))
	}
	loc, _ := url.Parse(first.Header.Get("Location"))
	if then := get(loc.RequestURI(), first.Cookies()); then.StatusCode != http.StatusOK {
		t.Errorf("the link's cookie: got %d, want 200 from the app", then.StatusCode)
	}
}
