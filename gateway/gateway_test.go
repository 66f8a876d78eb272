package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// fakeSandboxes stands in for the sandbox manager in unit tests of the
// handler chain; the integration tests use the real manager.
type fakeSandboxes struct {
	mu      sync.Mutex
	addrs   []string // successive endpoints handed out; the last repeats
	err     error
	ensures atomic.Int32
	forgets atomic.Int32
	lookups atomic.Int32 // Cached, Wake, Progress
	held    atomic.Int32
}

func (f *fakeSandboxes) Ensure(ctx context.Context, id string, tpl *config.Template) (sandboxmgr.Endpoint, error) {
	f.ensures.Add(1)
	if f.err != nil {
		return sandboxmgr.Endpoint{}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	addr := f.addrs[0]
	if len(f.addrs) > 1 {
		f.addrs = f.addrs[1:]
	}
	return sandboxmgr.Endpoint{ID: id, Addr: addr, Template: tpl.Name}, nil
}
func (f *fakeSandboxes) EnsureWith(ctx context.Context, id string, tpl *config.Template, _ sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	return f.Ensure(ctx, id, tpl)
}
func (f *fakeSandboxes) Forget(id, addr string) { f.forgets.Add(1) }

// Cached reports every sandbox ready, so navigations are proxied (no
// waiting page) in handler-chain tests.
func (f *fakeSandboxes) Cached(id string) (sandboxmgr.Endpoint, bool) {
	f.lookups.Add(1)
	return sandboxmgr.Endpoint{ID: id}, true
}
func (f *fakeSandboxes) Wake(string, *config.Template, sandboxmgr.Options) { f.lookups.Add(1) }
func (f *fakeSandboxes) Progress(string) sandboxmgr.Progress {
	f.lookups.Add(1)
	return sandboxmgr.Progress{Phase: sandboxmgr.PhaseReady}
}
func (f *fakeSandboxes) Touch(id string) {}
func (f *fakeSandboxes) Hold(id string) func() {
	f.held.Add(1)
	return func() { f.held.Add(-1) }
}

// echoApp mimics the test app: / echoes the request, /ws echoes messages,
// /sse streams events.
func echoApp(t testing.TB) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "path": r.URL.Path,
			"query": r.URL.RawQuery, "host": r.Host, "headers": r.Header})
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.Write(r.Context(), websocket.MessageText, []byte("hello"))
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			c.Write(r.Context(), typ, msg)
		}
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		fmt.Fprint(w, "data: last\n\n")
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

const testDomain = "preview.test"

// testConfig returns a config with one HS256 key and a default template.
func testConfig() *config.Config {
	c := &config.Config{
		Domains: config.StringList{testDomain},
		Auth: config.Auth{Audience: "previewgate", Issuers: []string{"test"},
			Keys: []config.Key{{KID: "k1", Alg: "HS256", Secret: "0123456789abcdef0123456789abcdef"}}},
		Templates:       map[string]*config.Template{"app": {Image: "testapp"}},
		DefaultTemplate: "app",
	}
	c.ApplyDefaults()
	return c
}

func mintFor(t testing.TB, cfg *config.Config, sandbox string, ttl time.Duration) string {
	t.Helper()
	tok, err := auth.Mint(cfg.Auth.Keys[0], auth.MintOptions{Subject: "tester", Sandbox: sandbox,
		Issuer: "test", Audience: cfg.Auth.Audience, TTL: ttl})
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	return tok
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startGateway runs the real handler chain on the real Server (lean
// HTTP/1.1 loop and net/http).
func startGateway(t testing.TB, cfg *config.Config, sb Sandboxes) (*Gateway, *httptest.Server) {
	t.Helper()
	g, err := New(cfg, sb, Options{}, testLogger(t))
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	t.Cleanup(g.Close)
	return g, serve(t, NewServer(cfg, g, testLogger(t)))
}

// serve runs s on a loopback listener until the test ends. The result is
// an httptest.Server only for its URL and Close.
func serve(t testing.TB, s *Server) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, s, ln)
}

// serveOn is serve on a given listener.
func serveOn(t testing.TB, s *Server, ln net.Listener) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	scheme := "http://"
	if s.TLSConfig != nil {
		scheme = "https://"
	}
	return &httptest.Server{URL: scheme + ln.Addr().String(), Listener: ln, Config: s.HTTP}
}

// request sends a request for host through the gateway server.
func request(t testing.TB, srv *httptest.Server, method, host, path, token string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, host, path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestHostRouting(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	app := echoApp(t)
	tok := mintFor(t, cfg, "*", time.Minute)
	tests := []struct {
		name string
		host string
		want int
	}{
		{"sandbox host", "sandbox-abc." + testDomain, 200},
		{"sandbox host with port", "sandbox-abc." + testDomain + ":8080", 200},
		{"upper case host", "SANDBOX-ABC.PREVIEW.TEST", 200},
		{"trailing dot", "sandbox-abc." + testDomain + ".", 200},
		{"foreign host", "evil.example", 404},
		{"bare domain", testDomain, 404},
		{"suffix trick", "sandbox-abc.evilpreview.test", 404},
		{"nested label", "x.sandbox-abc." + testDomain, 404},
		{"no prefix", "abc." + testDomain, 404},
		{"empty id", "sandbox-." + testDomain, 400},
		{"underscore", "sandbox-a_b." + testDomain, 400},
		{"leading hyphen", "sandbox--ab." + testDomain, 400},
		{"trailing hyphen", "sandbox-ab-." + testDomain, 400},
		{"too long", "sandbox-" + strings.Repeat("a", 56) + "." + testDomain, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb := &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}
			_, srv := startGateway(t, cfg, sb)
			resp := request(t, srv, "GET", tc.host, "/", tok)
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want != 200 && sb.ensures.Load()+sb.lookups.Load() != 0 {
				t.Fatalf("got %d Ensure and %d lookup calls for a rejected host, want 0", sb.ensures.Load(), sb.lookups.Load())
			}
		})
	}
}

func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	tok := mintFor(t, cfg, "abc", time.Minute)
	tests := []struct {
		name       string
		err        error
		want       int
		retryAfter bool
	}{
		{"not ready", fmt.Errorf("wait: %w", sandboxmgr.ErrNotReady), 504, false},
		{"docker down", fmt.Errorf("inspect: %w", sandboxmgr.ErrUnavailable), 503, true},
		{"capacity", sandboxmgr.ErrCapacity, 503, true},
		{"other", errors.New("boom"), 502, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, srv := startGateway(t, cfg, &fakeSandboxes{err: tc.err})
			resp := request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok)
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d, want %d", resp.StatusCode, tc.want)
			}
			if got := resp.Header.Get("Retry-After") != ""; got != tc.retryAfter {
				t.Fatalf("Retry-After present = %v, want %v", got, tc.retryAfter)
			}
			var body struct{ Error, Code string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Code == "" || body.Error == "" {
				t.Fatalf("got body %+v (%v), want JSON error and code", body, err)
			}
			if strings.Contains(body.Error, "boom") {
				t.Fatalf("internal error leaked to client: %q", body.Error)
			}
		})
	}
}

func TestErrorPageForBrowsers(t *testing.T) {
	t.Parallel()
	_, srv := startGateway(t, testConfig(), &fakeSandboxes{})
	resp := request(t, srv, "GET", "evil.example", "/", "", "Accept", "text/html,*/*")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "not a preview") {
		t.Fatalf("got %d %q %q, want 404 HTML page", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

func TestProxyHeaders(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	app := echoApp(t)
	_, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}})
	tok := mintFor(t, cfg, "abc", time.Minute)
	resp := request(t, srv, "GET", "sandbox-abc."+testDomain, "/p/q?x=1&y=2", tok,
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
	resp := request(t, srv, "GET", "sandbox-abc."+testDomain, "/", mintFor(t, cfg, "abc", time.Minute))
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
	dead := deadAddr(t)
	sb := &fakeSandboxes{addrs: []string{dead, app.Listener.Addr().String()}}
	_, srv := startGateway(t, cfg, sb)
	tok := mintFor(t, cfg, "abc", time.Minute)
	resp := request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok)
	if resp.StatusCode != 200 {
		t.Fatalf("got %d, want 200 after one re-ensure", resp.StatusCode)
	}
	if sb.forgets.Load() != 1 || sb.ensures.Load() != 2 {
		t.Fatalf("got %d forgets, %d ensures; want 1, 2", sb.forgets.Load(), sb.ensures.Load())
	}

	// A POST is not retried: it gets an honest 502.
	sb2 := &fakeSandboxes{addrs: []string{dead, app.Listener.Addr().String()}}
	_, srv2 := startGateway(t, cfg, sb2)
	if resp := request(t, srv2, "POST", "sandbox-abc."+testDomain, "/", tok); resp.StatusCode != 502 {
		t.Fatalf("POST: got %d, want 502", resp.StatusCode)
	}
}

// deadAddr returns a loopback address nobody listens on.
func deadAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestWebSocketThroughGateway(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	app := echoApp(t)
	sb := &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}
	_, srv := startGateway(t, cfg, sb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hdr := http.Header{"Authorization": {"Bearer " + mintFor(t, cfg, "abc", time.Minute)}}
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
	resp := request(t, srv, "GET", "sandbox-abc."+testDomain, "/sse", mintFor(t, cfg, "abc", time.Minute),
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
			_, srv := startGateway(t, cfg, &fakeSandboxes{err: tc.err, addrs: []string{deadAddr(t)}})
			tok := mintFor(t, cfg, "abc", time.Minute)
			for i := range 3 {
				resp := request(t, srv, "GET", "sandbox-abc."+testDomain, "/ws", tok,
					"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
					"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
				if resp.StatusCode != tc.want {
					t.Fatalf("attempt %d: got %d, want %d (a 429 means an earlier attempt kept its slot)", i, resp.StatusCode, tc.want)
				}
			}
		})
	}
}

func TestServes(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Routes = []config.Route{{Host: "docs.example.test", Upstream: "http://127.0.0.1:1"}}
	g, err := New(cfg, &fakeSandboxes{}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for host, want := range map[string]bool{
		"sandbox-abc." + testDomain: true, "docs.example.test": true, "DOCS.example.test": true,
		"evil.example": false, "sandbox-Bad_." + testDomain: false, testDomain: false,
		"x.sandbox-abc." + testDomain: false, "sandbox-\u212abc." + testDomain: false,
	} {
		if got := g.Serves(host); got != want {
			t.Errorf("Serves(%q): got %v, want %v", host, got, want)
		}
	}
}

// FuzzServes: host parsing never panics, and whatever it accepts is a route
// host or sandbox-<valid id>.<domain>.
func FuzzServes(f *testing.F) {
	for _, s := range []string{"sandbox-abc." + testDomain, "docs.example.test:443", "[::1]:80", "sandbox-." + testDomain,
		"SANDBOX-A." + testDomain + ".", "sandbox-a.b." + testDomain, ":", "", "\u212a"} {
		f.Add(s)
	}
	cfg := testConfig()
	cfg.Routes = []config.Route{{Host: "docs.example.test", Upstream: "http://127.0.0.1:1"}}
	g, err := New(cfg, &fakeSandboxes{}, Options{}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !g.Serves(host) {
			return
		}
		h := hostname(host)
		if h == "docs.example.test" {
			return
		}
		id, ok := strings.CutSuffix(h, "."+testDomain)
		id, ok2 := strings.CutPrefix(id, sandboxPrefix)
		if !ok || !ok2 || !config.ValidID(id) {
			t.Fatalf("Serves(%q) accepted %q", host, h)
		}
	})
}
