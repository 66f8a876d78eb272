package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// coldSandboxes are asleep until woken; a wake takes delay. EnsureWith
// follows the manager's contract: NoWake gets ErrAsleep unless a wake is
// in progress; otherwise it waits for the wake (starting one).
type coldSandboxes struct {
	fakeSandboxes
	delay time.Duration
	full  map[string]bool // ids refused with ErrCapacity
	mu    sync.Mutex      // guards wakes
	wakes map[string]chan struct{}
}

func (c *coldSandboxes) wake(id string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wakes == nil {
		c.wakes = map[string]chan struct{}{}
	}
	ch := c.wakes[id]
	if ch == nil {
		ch = make(chan struct{})
		c.wakes[id] = ch
		time.AfterFunc(c.delay, func() { close(ch) })
	}
	return ch
}

func (c *coldSandboxes) state(id string) (ch chan struct{}, ready bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch = c.wakes[id]
	if ch == nil {
		return nil, false
	}
	select {
	case <-ch:
		return ch, true
	default:
		return ch, false
	}
}

func (c *coldSandboxes) Cached(id string) (sandboxmgr.Endpoint, bool) {
	if _, ready := c.state(id); ready {
		return c.fakeSandboxes.Cached(id)
	}
	return sandboxmgr.Endpoint{}, false
}

func (c *coldSandboxes) Wake(id string, _ *config.Template, _ sandboxmgr.Options) { c.wake(id) }

func (c *coldSandboxes) Progress(id string) sandboxmgr.Progress {
	switch ch, ready := c.state(id); {
	case ready:
		return sandboxmgr.Progress{Phase: sandboxmgr.PhaseReady}
	case ch != nil:
		return sandboxmgr.Progress{Phase: sandboxmgr.PhaseStarting}
	}
	return sandboxmgr.Progress{}
}

func (c *coldSandboxes) EnsureWith(ctx context.Context, id string, tpl *config.Template, o sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	if c.full[id] {
		return sandboxmgr.Endpoint{}, sandboxmgr.ErrCapacity
	}
	ch, _ := c.state(id)
	if ch == nil {
		if o.NoWake {
			return sandboxmgr.Endpoint{}, sandboxmgr.ErrAsleep
		}
		ch = c.wake(id)
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return sandboxmgr.Endpoint{}, ctx.Err()
	}
	return c.fakeSandboxes.Ensure(ctx, id, tpl)
}

// Browsers' request heads by kind (fetch metadata as Chromium sends it).
var (
	navigationHead = []string{"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Sec-Fetch-Site", "none", "Accept", "text/html,application/xhtml+xml,*/*;q=0.8"}
	moduleHead     = []string{"Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "script", "Sec-Fetch-Site", "same-origin", "Accept", "*/*"}
	fetchHead      = []string{"Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty", "Sec-Fetch-Site", "same-origin", "Accept", "application/json"}
	apiHead        = []string{"Accept", "application/json"}
)

// TestColdStartByKind is the README's table of what each kind of request
// gets during a cold start, over HTTP/1.1 and HTTP/2 (#22): a navigation
// gets the waiting page (and starts the wake); a module or fetch arriving
// during the start is held, then forwarded, never answered with HTML; one
// at a sleeping sandbox with no start under way gets 503 asleep JSON with
// Retry-After; an API client is held through the wake it starts, and gets
// 503 JSON with Retry-After when the gateway cannot start it now.
func TestColdStartByKind(t *testing.T) {
	t.Parallel()
	app := echoApp(t)
	cfg := testConfig()
	const delay = 300 * time.Millisecond
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			sb := &coldSandboxes{fakeSandboxes: fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, delay: delay,
				full: map[string]bool{"full": true}}
			g, err := New(cfg, fakes(sb), Options{TLS: true}, testkit.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			s := NewServer(cfg, g, testkit.Logger(t))
			s.TLSConfig = testkit.TLSConfig("h2", "http/1.1")
			srv := serve(t, s)
			tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: proto == "HTTP/2.0"}
			if proto == "HTTP/1.1" {
				tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
			}
			t.Cleanup(tr.CloseIdleConnections)
			do := func(id string, head []string) (*http.Response, string, time.Duration) {
				t.Helper()
				req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
				req.Host = "sandbox-" + id + "." + testDomain
				req.Header.Set("Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute))
				for i := 0; i+1 < len(head); i += 2 {
					req.Header.Set(head[i], head[i+1])
				}
				t0 := time.Now()
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatalf("%s: %v", req.Host, err)
				}
				defer resp.Body.Close()
				if resp.Proto != proto {
					t.Fatalf("got %s, want %s", resp.Proto, proto)
				}
				b, _ := io.ReadAll(resp.Body)
				return resp, string(b), time.Since(t0)
			}
			wantJSON := func(what string, resp *http.Response, body string, status int, code string) {
				t.Helper()
				var e struct{ Code string }
				if resp.StatusCode != status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
					json.Unmarshal([]byte(body), &e) != nil || e.Code != code || resp.Header.Get("Retry-After") == "" {
					t.Errorf("%s: got %d %s %q (Retry-After %q), want %d JSON %s with Retry-After",
						what, resp.StatusCode, resp.Header.Get("Content-Type"), body, resp.Header.Get("Retry-After"), status, code)
				}
			}
			held := func(what string, resp *http.Response, body string, took time.Duration) {
				t.Helper()
				if resp.StatusCode != 200 || !strings.Contains(body, `"path":"/x"`) || took < delay/2 {
					t.Errorf("%s: got %d %q after %v, want the app's answer after the start (held)", what, resp.StatusCode, body, took)
				}
			}

			// A navigation gets the waiting page at once and starts the wake;
			// a module and a fetch sent meanwhile are held, then forwarded.
			resp, body, took := do("nav", navigationHead)
			if resp.StatusCode != 200 || !strings.Contains(body, `id="phases"`) || took > delay/2 {
				t.Errorf("navigation: got %d after %v, want the waiting page at once", resp.StatusCode, took)
			}
			var wg sync.WaitGroup
			for _, k := range []struct {
				name string
				head []string
			}{{"module", moduleHead}, {"fetch", fetchHead}} {
				wg.Go(func() {
					resp, body, took := do("nav", k.head)
					held(k.name+" during the start", resp, body, took)
				})
			}
			wg.Wait()

			// At a sleeping sandbox, with no start under way, a module or
			// fetch does not wake it: 503 JSON, never HTML.
			for _, head := range [][]string{moduleHead, fetchHead} {
				resp, body, _ := do("asleep", head)
				wantJSON("module/fetch at a sleeping sandbox", resp, body, 503, "asleep")
			}
			// An API client wakes it and is held until the app answers.
			resp, body, took = do("api", apiHead)
			held("API client", resp, body, took)
			// One the gateway cannot start now: 503 JSON with Retry-After.
			resp, body, _ = do("full", apiHead)
			wantJSON("API client at capacity", resp, body, 503, "busy")
		})
	}
}

// TestColdStartWebSocketHeld: an HMR WebSocket opened while its sandbox
// starts is held, then connected (#22).
func TestColdStartWebSocketHeld(t *testing.T) {
	t.Parallel()
	app := echoApp(t)
	cfg := testConfig()
	sb := &coldSandboxes{fakeSandboxes: fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, delay: 300 * time.Millisecond}
	_, srv := startGateway(t, cfg, sb)
	sb.Wake("abc", nil, sandboxmgr.Options{}) // a navigation started it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &websocket.DialOptions{Host: "sandbox-abc." + testDomain,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + testkit.Mint(t, cfg, "abc", time.Minute)},
			"Sec-Fetch-Mode": {"websocket"}, "Sec-Fetch-Dest": {"websocket"}, "Sec-Fetch-Site": {"same-origin"}}})
	if err != nil {
		t.Fatalf("dial during the start: %v", err)
	}
	defer c.CloseNow()
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "hello" || time.Since(t0) < 150*time.Millisecond {
		t.Errorf("got %q %v after %v, want the app's hello after the start", msg, err, time.Since(t0))
	}
}
