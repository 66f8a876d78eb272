package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// fakeClock is a limiter clock for tests over real sockets, where synctest
// cannot run.
type fakeClock struct{ off atomic.Int64 }

var clockBase = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *fakeClock) now() time.Time          { return clockBase.Add(time.Duration(c.off.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.off.Add(int64(d)) }

func startLimitedGateway(t *testing.T, cfg *config.Config) (*fakeSandboxes, *httptest.Server, *fakeClock, *Gateway) {
	t.Helper()
	return startLimitedGatewayOpts(t, cfg, Options{})
}

// startLimitedGatewayOpts is startLimitedGateway with opts.
func startLimitedGatewayOpts(t *testing.T, cfg *config.Config, opts Options) (*fakeSandboxes, *httptest.Server, *fakeClock, *Gateway) {
	t.Helper()
	app := echoApp(t)
	sb := &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}
	g, srv := startGatewayOpts(t, cfg, sb, opts)
	clk := &fakeClock{}
	g.limit.now = clk.now // before any request
	return sb, srv, clk, g
}

// TestRateLimitOverHTTP runs each limit through the real handler chain.
func TestRateLimitOverHTTP(t *testing.T) {
	t.Parallel()
	rate := &config.Rate{Rate: 0.5, Burst: 2}
	tests := []struct {
		kind  string
		set   func(*config.Limits)
		other string // a sandbox the limit does not cover, "" if it does
	}{
		{"ip", func(l *config.Limits) { l.PerIP = rate }, ""},
		{"sandbox", func(l *config.Limits) { l.PerSandbox = rate }, "def"},
		{"subject", func(l *config.Limits) { l.PerSubject = rate }, ""},
	}
	for _, tc := range tests {
		for _, fe := range frontEnds {
			t.Run(tc.kind+"/"+fe.name, func(t *testing.T) {
				t.Parallel()
				cfg := testConfig()
				tc.set(&cfg.Limits)
				sb, srv, clk, _ := startLimitedGatewayOpts(t, cfg, Options{NetHTTPOnly: fe.netHTTPOnly})
				tok := testkit.Mint(t, cfg, "*", time.Hour)
				host := "sandbox-abc." + testDomain
				for i := range 2 {
					if resp := testkit.Request(t, srv, "GET", host, "/", tok); resp.StatusCode != 200 {
						t.Fatalf("request %d: got %d, want 200", i+1, resp.StatusCode)
					}
				}
				resp := testkit.Request(t, srv, "GET", host, "/", tok)
				if resp.StatusCode != 429 {
					t.Fatalf("request 3: got %d, want 429", resp.StatusCode)
				}
				if got := resp.Header.Get("Retry-After"); got != "2" {
					t.Errorf("got Retry-After %q, want 2", got)
				}
				if got, want := resp.Header.Get("RateLimit-Policy"), `"`+tc.kind+`";q=2;w=4`; got != want {
					t.Errorf("got RateLimit-Policy %q, want %q", got, want)
				}
				if got, want := resp.Header.Get("RateLimit"), `"`+tc.kind+`";r=0;t=2`; got != want {
					t.Errorf("got RateLimit %q, want %q", got, want)
				}
				var body struct{ Error, Code string }
				if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Code != "rate_limited" {
					t.Errorf("got body %+v (%v), want code rate_limited", body, err)
				}
				if got := sb.ensures.Load(); got != 2 {
					t.Errorf("got %d Ensure calls, want 2: a limited request must not reach the sandbox", got)
				}
				otherHost := "sandbox-def." + testDomain
				if got := testkit.Request(t, srv, "GET", otherHost, "/", tok).StatusCode; (got == 200) != (tc.other != "") {
					t.Errorf("other sandbox: got %d, want %s", got, map[bool]string{true: "200", false: "429"}[tc.other != ""])
				}
				clk.advance(2 * time.Second)
				if got := testkit.Request(t, srv, "GET", host, "/", tok).StatusCode; got != 200 {
					t.Fatalf("after Retry-After: got %d, want 200", got)
				}
			})
		}
	}
}

// TestRateLimitClientIPOverHTTP checks that X-Forwarded-For picks the bucket
// only when the peer (here loopback) is a trusted proxy.
func TestRateLimitClientIPOverHTTP(t *testing.T) {
	t.Parallel()
	for _, trusted := range []bool{true, false} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Limits.PerIP = &config.Rate{Rate: 1, Burst: 1}
			if trusted {
				cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
			}
			_, srv, _, _ := startLimitedGateway(t, cfg)
			tok := testkit.Mint(t, cfg, "*", time.Hour)
			host := "sandbox-abc." + testDomain
			send := func(xff string) int {
				return testkit.Request(t, srv, "GET", host, "/", tok, "X-Forwarded-For", xff).StatusCode
			}
			if got := send("198.51.100.1"); got != 200 {
				t.Fatalf("first client: got %d, want 200", got)
			}
			if got := send("198.51.100.1"); got != 429 {
				t.Fatalf("first client again: got %d, want 429", got)
			}
			want := 429 // the header is ignored: the same peer
			if trusted {
				want = 200 // a different client behind the proxy
			}
			if got := send("198.51.100.2"); got != want {
				t.Fatalf("second spoofed client: got %d, want %d", got, want)
			}
		})
	}
}

// TestTemplateOverrideOverHTTP uses a route whose template has its own
// per-IP rate.
func TestTemplateOverrideOverHTTP(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Limits.PerIP = &config.Rate{Rate: 1, Burst: 50}
	cfg.Templates["strict"] = &config.Template{Image: "testapp",
		Limits: &config.RateLimits{PerIP: &config.Rate{Rate: 1, Burst: 1}}}
	cfg.Routes = []config.Route{{Host: "strict.example", Sandbox: "strict", Template: "strict"}}
	cfg.ApplyDefaults()
	_, srv, _, _ := startLimitedGateway(t, cfg)
	tok := testkit.Mint(t, cfg, "*", time.Hour)
	if got := testkit.Request(t, srv, "GET", "strict.example", "/", tok).StatusCode; got != 200 {
		t.Fatalf("strict first: got %d, want 200", got)
	}
	resp := testkit.Request(t, srv, "GET", "strict.example", "/", tok)
	if resp.StatusCode != 429 || resp.Header.Get("RateLimit-Policy") != `"ip";q=1;w=1` {
		t.Fatalf("strict second: got %d %q, want 429 with the template's policy", resp.StatusCode,
			resp.Header.Get("RateLimit-Policy"))
	}
	for i := range 3 {
		if got := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok).StatusCode; got != 200 {
			t.Fatalf("default template request %d: got %d, want 200 (global burst 50)", i, got)
		}
	}
}

// TestWebSocketCapsOverHTTP opens real WebSockets through the gateway.
func TestWebSocketCapsOverHTTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		perSandbox, perIP  int
		first, second, hit string // sandboxes of the two open sockets and the refused one
	}{
		{"per sandbox", 2, 32, "abc", "abc", "abc"},
		{"per ip", 64, 2, "abc", "def", "ghi"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Limits.WebSocketsPerSandbox = tc.perSandbox
			cfg.Limits.WebSocketsPerIP = tc.perIP
			_, srv, _, g := startLimitedGateway(t, cfg)
			tok := testkit.Mint(t, cfg, "*", time.Hour)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			dial := func(sandbox string) (*websocket.Conn, *http.Response, error) {
				return dialSocket(ctx, srv, "sandbox-"+sandbox+"."+testDomain, tok)
			}
			c1, _, err := dial(tc.first)
			if err != nil {
				t.Fatalf("first socket: %v", err)
			}
			defer c1.CloseNow()
			c2, _, err := dial(tc.second)
			if err != nil {
				t.Fatalf("second socket: %v", err)
			}
			defer c2.CloseNow()
			_, resp, err := dial(tc.hit)
			if err == nil || resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("third socket: got %v (%v), want 429 with Retry-After", resp, err)
			}
			var body struct{ Code string }
			json.NewDecoder(resp.Body).Decode(&body)
			if body.Code != "too_many_websockets" {
				t.Fatalf("got code %q, want too_many_websockets", body.Code)
			}
			// Plain requests are not capped.
			if got := testkit.Request(t, srv, "GET", "sandbox-"+tc.hit+"."+testDomain, "/", tok).StatusCode; got != 200 {
				t.Fatalf("plain request: got %d, want 200", got)
			}
			// Closing one frees its slot once the proxy has torn it down.
			c1.Close(websocket.StatusNormalClosure, "")
			open := func() int { return g.limit.openSockets(tc.first, netip.Addr{}) }
			if tc.first != tc.second {
				open = func() int { return g.limit.openSockets("", netip.MustParseAddr("127.0.0.1")) }
			}
			for open() != 1 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			c3, _, err := dial(tc.hit)
			if err != nil {
				t.Fatalf("after closing one: %v", err)
			}
			c3.CloseNow()
		})
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Templates["app"].MaxBodyBytes = 16
	sb, srv, _, _ := startLimitedGateway(t, cfg)
	tok := testkit.Mint(t, cfg, "abc", time.Hour)
	post := func(body io.Reader) *http.Response {
		req := abcRequest("POST", srv.URL+"/upload", body, tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if got := post(strings.NewReader(strings.Repeat("x", 16))).StatusCode; got != 200 {
		t.Fatalf("16 bytes: got %d, want 200", got)
	}
	ensures := sb.ensures.Load()
	resp := post(strings.NewReader(strings.Repeat("x", 17)))
	var body struct{ Code string }
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 413 || body.Code != "body_too_large" {
		t.Fatalf("declared 17 bytes: got %d %q, want 413 body_too_large", resp.StatusCode, body.Code)
	}
	if sb.ensures.Load() != ensures {
		t.Fatalf("an oversized declared body reached Ensure")
	}
	// Without a declared length the body is cut while streaming: the app
	// never gets more than the limit.
	resp = post(io.MultiReader(strings.NewReader(strings.Repeat("x", 4096))))
	if resp.StatusCode == 200 {
		t.Fatalf("chunked 4096 bytes: got 200, want a failure")
	}
	t.Logf("chunked oversized body answered %d", resp.StatusCode)
}
