package e2e

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestQuickStartScales is issue 16's done-means 1 against the real binary
// and engine: `serve --http ADDR --admin ADDR` (no file) prints a URL that
// works; `token mint --sandbox other` (no file) prints a token that opens
// sandbox-other on that running gateway; after a restart the first URL,
// its cookie and the minted token still work. Then the starter config of
// `config init` serves as written.
func TestQuickStartScales(t *testing.T) {
	cli := dockertest.Client(t)
	bin := buildBinary(t)
	dir := t.TempDir() // the working directory: the default data dir is ./previewgate-data
	httpAddr, adminAddr := freePort(t), freePort(t)
	_, port, _ := net.SplitHostPort(httpAddr)
	args := append([]string{"serve", "--http", httpAddr, "--admin", adminAddr}, labelArgs()...)
	removeSandboxesAtEnd(t, "demo", "other", "starter")
	urlRe := regexp.MustCompile(`http://(sandbox-demo\.localhost:` + port + `)/\?access_token=(\S+)`)

	p := startProcIn(t, dir, bin, args...)
	m := p.waitFor(t, p.stdout, urlRe)
	demoHost, demoTok := m[1], m[2]
	adminTok := p.waitFor(t, p.stdout, regexp.MustCompile(`this run's admin token: (\S+)\)`))[1]
	configRoundTrip(t, adminAddr, adminTok)
	cookie := exchange(t, httpAddr, demoHost, demoTok)
	getOK(t, httpAddr, demoHost, "Cookie", cookie.Name+"="+cookie.Value)

	// Scoped to its data dir (#13): the demo container carries the
	// instance id kept there, so another development gateway on this
	// engine neither adopts nor stops it.
	inst, err := os.ReadFile(filepath.Join(dir, "previewgate-data", "instance-id"))
	if err != nil {
		t.Fatalf("the development gateway kept no instance id: %v", err)
	}
	demo := dockertest.OnlyContainer(t, cli, runtime.LabelSandbox+"=demo")
	if got, want := demo.Labels[runtime.LabelInstance], strings.TrimSpace(string(inst)); got != want || want == "" {
		t.Errorf("demo container's %s label %q, want the data dir's instance id %q", runtime.LabelInstance, got, want)
	}

	cmd := exec.Command(bin, "token", "mint", "--sandbox", "other")
	cmd.Dir = dir
	var mintErr bytes.Buffer
	cmd.Stderr = &mintErr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("token mint --sandbox other: %v", err)
	}
	otherTok := strings.TrimSpace(string(out))
	otherHost := "sandbox-other.localhost:" + port
	// The URL it prints to open is on the port serve listens on (--http),
	// not the default's 8080.
	if want := "open: http://" + otherHost + "/?access_token=" + otherTok; !strings.Contains(mintErr.String(), want) {
		t.Errorf("token mint: got stderr %q, want %q", mintErr.String(), want)
	}
	getOK(t, httpAddr, otherHost, "Authorization", "Bearer "+otherTok)

	stopProc(t, p)
	p = startProcIn(t, dir, bin, args...)
	p.waitFor(t, p.stdout, urlRe)
	exchange(t, httpAddr, demoHost, demoTok) // the first URL
	getOK(t, httpAddr, demoHost, "Cookie", cookie.Name+"="+cookie.Value)
	getOK(t, httpAddr, otherHost, "Authorization", "Bearer "+otherTok)
	stopProc(t, p)

	// config init's starter, served as written (listeners moved by flags).
	cfgFile := filepath.Join(dir, "previewgate.yaml")
	if out, err := exec.Command(bin, "config", "init", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("config init: %v %s", err, out)
	}
	p = startProcIn(t, dir, bin, append([]string{"serve", "--config", cfgFile, "--http", httpAddr, "--admin", adminAddr}, labelArgs()...)...)
	p.waitFor(t, p.stderr, regexp.MustCompile(`previewgate serving`))
	out, err = exec.Command(bin, "token", "mint", "--config", cfgFile, "--sandbox", "starter").Output()
	if err != nil {
		t.Fatalf("token mint --config starter: %v", err)
	}
	getOK(t, httpAddr, "sandbox-starter.localhost:"+port, "Authorization", "Bearer "+strings.TrimSpace(string(out)))
}

// exchange opens the ?access_token= URL and returns the cookie of its 303.
func exchange(t *testing.T, addr, host, tok string) *http.Cookie {
	t.Helper()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", "http://"+addr+"/?access_token="+tok, nil)
	req.Host = host
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Fatalf("%s ?access_token=: got %d with %d cookies, want 303 setting the cookie", host, resp.StatusCode, len(resp.Cookies()))
	}
	return resp.Cookies()[0]
}

// getOK asks host for / with one header and wants the demo page.
func getOK(t *testing.T, addr, host, key, value string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = host
	req.Header.Set(key, value)
	c := &http.Client{Timeout: 90 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("WebSocket counter")) {
		t.Fatalf("%s with %s: got %d %.300q, want the demo page", host, key, resp.StatusCode, body)
	}
}

// stopProc sends SIGTERM and waits for a clean exit.
func stopProc(t *testing.T, p *gatewayProc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("gateway exit: %v, want 0", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("gateway did not exit after SIGTERM")
	}
}

// configRoundTrip: the development default's config as the admin API (and
// page) shows it validates as shown: REDACTED stands for the key and
// admin token serve set in code.
func configRoundTrip(t *testing.T, adminAddr, tok string) {
	t.Helper()
	c := &adminapi.Client{BaseURL: "http://" + adminAddr, Token: tok}
	shown, err := c.Config(t.Context())
	if err != nil {
		t.Fatalf("GET /admin/config: %v", err)
	}
	if v, err := c.ValidateConfig(t.Context(), shown); err != nil || !v.Valid {
		t.Fatalf("POST /admin/config/validate of the config shown: %+v, %v; want valid", v, err)
	}
}
