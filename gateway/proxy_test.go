package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

func TestProxyHeaders(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Templates["app"].HostHeader = config.HostPreserve
	app := echoApp(t)
	_, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}})
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/p/q?x=1&y=2", tok,
		"X-Forwarded-For", "6.6.6.6", "X-Forwarded-Host", "spoofed.example")
	var echo struct {
		Host, Path, Query string
		Headers           http.Header
	}
	if err := json.NewDecoder(resp.Body).Decode(&echo); err != nil {
		t.Fatal(err)
	}
	if want := "sandbox-abc." + testDomain; echo.Host != want {
		t.Errorf("got Host %q, want %q (preserved)", echo.Host, want)
	}
	if echo.Path != "/p/q" || echo.Query != "x=1&y=2" {
		t.Errorf("got path %q query %q, want /p/q x=1&y=2", echo.Path, echo.Query)
	}
	if got := echo.Headers.Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("got X-Forwarded-For %q, want 127.0.0.1 (client-sent values dropped)", got)
	}
	if got := echo.Headers.Get("X-Forwarded-Host"); got != "sandbox-abc."+testDomain {
		t.Errorf("got X-Forwarded-Host %q", got)
	}
	if got := echo.Headers.Get("X-Forwarded-Proto"); got != "http" {
		t.Errorf("got X-Forwarded-Proto %q, want http", got)
	}
	if got := echo.Headers.Get("Authorization"); got != "" {
		t.Errorf("token reached the sandbox: Authorization %q", got)
	}
}

func TestHostRewrite(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Templates["app"].HostHeader = config.HostRewrite
	app := echoApp(t)
	_, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}})
	resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", testkit.Mint(t, cfg, "abc", time.Minute))
	var echo struct{ Host string }
	json.NewDecoder(resp.Body).Decode(&echo)
	if echo.Host != app.Listener.Addr().String() {
		t.Fatalf("got Host %q, want %q", echo.Host, app.Listener.Addr().String())
	}
}

func TestRetryAfterDialFailure(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	app := echoApp(t)
	dead := testkit.DeadAddr(t)
	sb := &fakeSandboxes{addrs: []string{dead, app.Listener.Addr().String()}}
	_, srv := startGateway(t, cfg, sb)
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok)
	if resp.StatusCode != 200 {
		t.Fatalf("got %d, want 200 after one re-ensure", resp.StatusCode)
	}
	if sb.forgets.Load() != 1 || sb.ensures.Load() != 2 {
		t.Fatalf("got %d forgets, %d ensures; want 1, 2", sb.forgets.Load(), sb.ensures.Load())
	}

	// A POST with a body is re-ensured too: a failed dial sent nothing
	// (the body is read only once a connection stands).
	sb2 := &fakeSandboxes{addrs: []string{dead, app.Listener.Addr().String()}}
	_, srv2 := startGateway(t, cfg, sb2)
	req := abcRequest("POST", srv2.URL+"/", strings.NewReader("payload"), tok)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var echo struct{ Method string }
	json.NewDecoder(resp2.Body).Decode(&echo)
	if resp2.StatusCode != 200 || echo.Method != "POST" || sb2.ensures.Load() != 2 {
		t.Fatalf("POST: got %d %q after %d ensures, want 200 POST after 2", resp2.StatusCode, echo.Method, sb2.ensures.Load())
	}
}

func TestWebSocketThroughGateway(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	app := echoApp(t)
	sb := &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}
	_, srv := startGateway(t, cfg, sb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hdr := http.Header{"Authorization": {"Bearer " + testkit.Mint(t, cfg, "abc", time.Minute)}}
	hdr.Set("Host", "sandbox-abc."+testDomain)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws",
		&websocket.DialOptions{HTTPHeader: hdr, Host: "sandbox-abc." + testDomain})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "hello" {
		t.Fatalf("got push %q (%v), want hello", msg, err)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "ping" {
		t.Fatalf("got echo %q (%v), want ping", msg, err)
	}
	if got := sb.held.Load(); got != 1 {
		t.Fatalf("got %d held sockets while open, want 1", got)
	}
	c.Close(websocket.StatusNormalClosure, "")
}

func TestSSEStreamsBeforeEnd(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	app := echoApp(t)
	_, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}})
	resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/sse", testkit.Mint(t, cfg, "abc", time.Minute),
		"Accept", "text/event-stream")
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "data: first\n" {
			t.Fatalf("got %q, want first event", line)
		}
	case <-time.After(10 * time.Second):
		// The backend holds the stream open for 30s after the first event:
		// not seeing it by now means the proxy buffered it.
		t.Fatal("first SSE event not delivered before the stream ended")
	}
}

// TestFailedUpgradeReleasesSocketSlot: an upgrade that never reaches the
// app (here: the sandbox does not become ready) gives its WebSocket slot
// back, so the next attempt is not refused as over the cap.
func TestFailedUpgradeReleasesSocketSlot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		err  error
		want int
	}{
		{"not ready", nil, sandboxmgr.ErrNotReady, http.StatusGatewayTimeout},
		{"no template", func(c *config.Config) { c.DefaultTemplate = "" }, nil, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Limits.WebSocketsPerSandbox = 1
			if tc.edit != nil {
				tc.edit(cfg)
			}
			_, srv := startGateway(t, cfg, &fakeSandboxes{err: tc.err, addrs: []string{testkit.DeadAddr(t)}})
			tok := testkit.Mint(t, cfg, "abc", time.Minute)
			for i := range 3 {
				resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/ws", tok,
					"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
					"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
				if resp.StatusCode != tc.want {
					t.Fatalf("attempt %d: got %d, want %d (a 429 means an earlier attempt kept its slot)", i, resp.StatusCode, tc.want)
				}
			}
		})
	}
}
