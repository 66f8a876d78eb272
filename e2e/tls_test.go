package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/previewgate/previewgate/internal/testing/acmetest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// tlsServer is the real binary serving with a config file in some tls mode,
// with the testapp as its only template.
type tlsServer struct {
	bin, cfgFile          string
	httpAddr, httpsAddr   string
	domain, id, host, tok string
}

// startTLSServer writes a config for domain with the given tls section (a
// YAML flow mapping), starts `previewgate serve` on free loopback ports and
// mints a token for a sandbox id unique to this run.
func startTLSServer(t *testing.T, domain, tlsYAML string) *tlsServer {
	t.Helper()
	image := dockertest.TestAppImage(t)
	s := &tlsServer{bin: buildBinary(t), httpAddr: freePort(t), httpsAddr: freePort(t), domain: domain}
	dir := t.TempDir()
	s.cfgFile = filepath.Join(dir, "previewgate.yaml")
	cfg := fmt.Sprintf(`
domain: %s
listen: {http: %q, https: %q, admin: %q}
data_dir: %q
tls: %s
docker: {network: %q}
auth:
  audience: previewgate
  issuers: [test]
  keys: [{kid: k1, alg: HS256, secret: "test-secret-test-secret-test-secret-123"}]
default_template: app
templates:
  app: {image: %q, ready: {path: /, timeout: 20s}}
`, domain, s.httpAddr, s.httpsAddr, freePort(t), filepath.Join(dir, "data"), tlsYAML, dockertest.Network(t), image)
	if err := os.WriteFile(s.cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Unique per run: the container name previewgate-<id> is global to the
	// engine, which other test processes share.
	s.id = "tls-" + dockertest.RunID()
	s.host = "sandbox-" + s.id + "." + domain
	out, err := exec.Command(s.bin, "token", "mint", "--config", s.cfgFile, "--sandbox", s.id).Output()
	if err != nil {
		t.Fatalf("token mint: %v", err)
	}
	s.tok = strings.TrimSpace(string(out))

	p := startProc(t, s.bin, append([]string{"serve", "--config", s.cfgFile}, labelArgs()...)...)
	p.waitFor(t, p.stderr, regexp.MustCompile(`previewgate serving`))
	return s
}

// wantEcho checks that body is the test app's JSON echo of a request for
// s.host and path.
func (s *tlsServer) wantEcho(t *testing.T, body []byte, path string) {
	t.Helper()
	var echo struct {
		Path    string
		Headers http.Header
	}
	if err := json.Unmarshal(body, &echo); err != nil {
		t.Fatalf("got body %q (%v), want the test app's JSON echo", body, err)
	}
	// The real host reaches the app in X-Forwarded-Host in every host mode.
	if fwd := echo.Headers.Get("X-Forwarded-Host"); echo.Path != path || hostOnly(fwd) != s.host {
		t.Fatalf("app saw X-Forwarded-Host %q path %q, want %s %s", fwd, echo.Path, s.host, path)
	}
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// TestTLSSelfSignedCurl is issue 4 done-means 4, as docs/tls.md tells users:
// `previewgate ca export` prints the local CA, and curl trusting only that CA
// gets the app's 200 from https://sandbox-<id>.localhost:<port>/; plain HTTP
// redirects to HTTPS.
func TestTLSSelfSignedCurl(t *testing.T) {
	dockertest.Client(t) // skipped under -short before asking for curl
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl is needed for this test (apt-get install curl): %v", err)
	}
	s := startTLSServer(t, "localhost", "{mode: self-signed}")

	caPEM, err := exec.Command(s.bin, "ca", "export", "--config", s.cfgFile).Output()
	if err != nil {
		t.Fatalf("ca export: %v", err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	_, httpsPort, _ := net.SplitHostPort(s.httpsAddr)
	_, httpPort, _ := net.SplitHostPort(s.httpAddr)
	resolve := func(port string) []string { return []string{"--resolve", s.host + ":" + port + ":127.0.0.1"} }
	runCurl := func(t *testing.T, args ...string) (body []byte, status string) {
		t.Helper()
		args = append([]string{"-sS", "--max-time", "60", "--cacert", caFile,
			"-H", "Authorization: Bearer " + s.tok, "-w", "\n%{http_code}"}, args...)
		out, err := exec.Command(curl, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", args[len(args)-1], err, out)
		}
		i := strings.LastIndexByte(string(out), '\n')
		return out[:i], string(out[i+1:])
	}

	t.Run("https with the exported CA", func(t *testing.T) {
		url := "https://" + s.host + ":" + httpsPort + "/"
		body, status := runCurl(t, append(resolve(httpsPort), url)...)
		if status != "200" {
			t.Fatalf("curl %s: got status %s (%s), want 200", url, status, body)
		}
		s.wantEcho(t, body, "/")
	})

	t.Run("http redirects to https", func(t *testing.T) {
		url := "http://" + s.host + ":" + httpPort + "/p/q?x=1&y=2"
		acmetest.WantRedirect(t, s.httpAddr, s.httpsAddr, http.MethodGet, url)
		// And curl following it (keeping the token across the port change)
		// ends at the app.
		args := append(resolve(httpPort), resolve(httpsPort)...)
		body, code := runCurl(t, append(args, "-L", "--location-trusted", url)...)
		if code != "200" {
			t.Fatalf("curl -L %s: got status %s (%s), want 200", url, code, body)
		}
		s.wantEcho(t, body, "/p/q")
	})
}

// TestTLSFilesReplacedUnderLoad is issue 4 done-means 3 with the binary:
// replacing cert_file and key_file on disk switches the served certificate
// while client loops keep making requests through the gateway, and none of
// them fails.
func TestTLSFilesReplacedUnderLoad(t *testing.T) {
	ca := acmetest.NewCA(t)
	const domain = "preview.test"
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	c1, k1 := ca.Leaf(t, 1001, "*."+domain)
	c2, k2 := ca.Leaf(t, 1002, "*."+domain)
	replaceFile(t, certFile, c1)
	replaceFile(t, keyFile, k1)
	s := startTLSServer(t, domain, fmt.Sprintf("{mode: files, cert_file: %q, key_file: %q}", certFile, keyFile))

	// Every request handshakes anew (no keep-alive), so each sees the
	// certificate served at that moment. Each worker has a client of its
	// own: a shared transport lets one worker's request take the HTTP/2
	// connection another worker dialed before the swap, which reads as the
	// old certificate served after the new one.
	newClient := func() *http.Client {
		c := acmetest.Client(s.httpsAddr, ca.Pool)
		c.Transport.(*http.Transport).DisableKeepAlives = true
		return c
	}
	get := func(client *http.Client) (serial int64, err error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+s.host+"/loop", nil)
		req.Header.Set("Authorization", "Bearer "+s.tok)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
	}
	if _, err := get(newClient()); err != nil { // the cold start, outside the loop
		t.Fatalf("first request: %v", err)
	}

	const workers = 4
	var (
		mu      sync.Mutex // guards the fields below
		stop    bool
		seen    = map[int64]int{}
		errs    []error
		regress []string
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			client := newClient()
			var last int64
			for {
				mu.Lock()
				done := stop
				mu.Unlock()
				if done {
					return
				}
				serial, err := get(client)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					seen[serial]++
					if serial < last {
						regress = append(regress, fmt.Sprintf("worker %d: serial %d after %d", w, serial, last))
					}
					last = serial
				}
				mu.Unlock()
			}
		})
	}
	count := func(serial int64, n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return seen[serial] >= n
		}
	}
	testkit.WaitFor(t, "requests with the first certificate", count(1001, 20))
	// One file after the other, each by rename as deployment tools do: for
	// a moment the new certificate sits beside the old key, and the old pair
	// must keep serving.
	replaceFile(t, certFile, c2)
	replaceFile(t, keyFile, k2)
	testkit.WaitFor(t, "requests with the replaced certificate", count(1002, 20))
	mu.Lock()
	stop = true
	mu.Unlock()
	wg.Wait()

	if len(errs) > 0 {
		t.Errorf("%d requests failed during the switch, first: %v", len(errs), errs[0])
	}
	if len(regress) > 0 {
		t.Errorf("old certificate served after the new one: %v", regress)
	}
	if len(seen) != 2 {
		t.Errorf("serials served: got %v, want only 1001 and 1002", seen)
	}
	t.Logf("requests per serial: %v", seen)
}

// replaceFile writes data to path through a temporary file and a rename, so
// a reader sees the old or the new content, never a partial one.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
