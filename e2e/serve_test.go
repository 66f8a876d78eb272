package e2e

import (
	"bytes"
	"context"
	"fmt"
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

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
)

// TestDevDefaultServesDemo follows the README: `previewgate serve` with no
// config serves the demo preview at the printed URL, and its WebSocket
// counter counts.
func TestDevDefaultServesDemo(t *testing.T) {
	dockertest.Client(t)
	bin := buildBinary(t)
	// The README's `previewgate serve`, on a free port (--http) and with
	// a data dir of its own (the working directory), so that it runs next
	// to another gateway on this machine.
	addr, adminAddr := freePort(t), freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	removeSandboxesAtEnd(t, "demo")
	p := startProcIn(t, t.TempDir(), bin, append([]string{"serve", "--http", addr, "--admin", adminAddr}, labelArgs()...)...)
	m := p.waitFor(t, p.stdout, regexp.MustCompile(`(http://sandbox-demo\.localhost:`+port+`/)\?access_token=(\S+)`))
	url, tok := m[1], m[2]

	// The token is exchanged for a cookie with a 303 to the clean URL.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", "http://"+addr+"/?access_token="+tok, nil)
	req.Host = "sandbox-demo.localhost:" + port
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("got %d Location %q, want 303 to / (url %s)", resp.StatusCode, resp.Header.Get("Location"), url)
	}
	cookie := resp.Cookies()[0]

	req, _ = http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = "sandbox-demo.localhost:" + port
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("WebSocket counter")) {
		t.Fatalf("got %d %q, want the demo page", resp.StatusCode, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hdr := http.Header{"Cookie": {cookie.Name + "=" + cookie.Value}, "Origin": {"http://sandbox-demo.localhost:" + port}}
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{Host: "sandbox-demo.localhost:" + port, HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer c.CloseNow()
	var counts []string
	for len(counts) < 2 {
		_, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("counter: %v", err)
		}
		counts = append(counts, string(msg))
	}
	if counts[0] != "1" || counts[1] != "2" {
		t.Fatalf("got counter %v, want 1, 2", counts)
	}

	// SIGHUP reloads a config file (README); the development default has
	// none. It must neither end the gateway (the signal's default action)
	// nor pass unsaid.
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, p.stderr, regexp.MustCompile(`SIGHUP: nothing to reload`))
	resp, err = http.Get("http://" + adminAddr + "/healthz")
	if err != nil {
		t.Fatalf("after SIGHUP: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after SIGHUP: got /healthz %d, want 200", resp.StatusCode)
	}
}

// TestGracefulShutdown: SIGTERM during a 2-second request lets it finish,
// sends 1001 to a held WebSocket, exits 0, and leaves the container running.
func TestGracefulShutdown(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.TestAppImage(t)
	bin := buildBinary(t)
	httpAddr, adminAddr := freePort(t), freePort(t)
	cfgFile := filepath.Join(t.TempDir(), "previewgate.yaml")
	t.Setenv("TEST_JWT_SECRET", "test-secret-test-secret-test-secret-123")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
domain: preview.localhost
listen: {http: %q, admin: %q}
docker: {network: %q}
auth:
  audience: previewgate
  issuers: [test]
  keys: [{kid: k1, alg: HS256, secret: "${TEST_JWT_SECRET}"}]
default_template: app
templates:
  app: {image: %q, ready: {path: /, timeout: 20s}}
`, httpAddr, adminAddr, dockertest.Network(t), image)), 0o600)

	out, err := exec.Command(bin, "token", "mint", "--config", cfgFile, "--sandbox", "shutdown").Output() // stdout: the token alone (stderr names the URL to open)
	if err != nil {
		t.Fatalf("token mint: %v %s", err, out)
	}
	tok := strings.TrimSpace(string(out))

	p := startProc(t, bin, append([]string{"serve", "--config", cfgFile}, labelArgs()...)...)
	p.waitFor(t, p.stderr, regexp.MustCompile(`previewgate serving`))
	host := "sandbox-shutdown.preview.localhost"

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+httpAddr+"/ws", &websocket.DialOptions{Host: host,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer ws.CloseNow()
	if _, _, err := ws.Read(ctx); err != nil {
		t.Fatalf("first push: %v", err)
	}

	slow := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+httpAddr+"/slow?d=2s", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		slow <- err
	}()
	time.Sleep(500 * time.Millisecond) // let the slow request reach the app
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// The WebSocket gets 1001 (going away).
	for {
		_, _, err := ws.Read(ctx)
		if err == nil {
			continue // ticks still in flight
		}
		if got := websocket.CloseStatus(err); got != websocket.StatusGoingAway {
			t.Fatalf("got close %v (%v), want 1001 going away", got, err)
		}
		break
	}
	if err := <-slow; err != nil {
		t.Fatalf("in-flight request during shutdown: %v", err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("gateway exit: %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not exit within the grace period")
	}
	ctr, err := cli.ContainerInspect(context.Background(), mgrtest.ContainerOf(context.Background(), cli, "shutdown"))
	if err != nil || ctr.State == nil || !ctr.State.Running {
		t.Fatalf("sandbox container after shutdown: %v %+v, want still running", err, ctr.State)
	}
}
