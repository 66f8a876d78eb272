package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// callLog is a running sandbox's manager that logs every call the
// gateway makes: Sandbox, and each call on the handle it returns. Any
// handle method it does not override is the nil interface's: a call the
// test did not expect panics.
type callLog struct {
	ep sandboxmgr.Endpoint

	mu    sync.Mutex // guards calls
	calls []string
}

func (c *callLog) log(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, name)
}

// take returns the calls logged since the last take.
func (c *callLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

func (c *callLog) Sandbox(string) sandboxmgr.Handle {
	c.log("Sandbox")
	return loggedHandle{c: c}
}

type loggedHandle struct {
	sandboxmgr.Handle
	c *callLog
}

func (h loggedHandle) Snapshot() sandboxmgr.Snapshot {
	h.c.log("Snapshot")
	return sandboxmgr.Snapshot{Template: h.c.ep.Template, Exists: true, Fresh: true, Endpoint: h.c.ep, Ready: true,
		Progress: sandboxmgr.Progress{Phase: sandboxmgr.PhaseReady}}
}

func (h loggedHandle) Ensure(context.Context, *config.Template, sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	h.c.log("Ensure")
	return h.c.ep, nil
}

func (h loggedHandle) Touch() { h.c.log("Touch") }

func (h loggedHandle) Confirm(context.Context, string, string) error {
	h.c.log("Confirm")
	return nil
}

func (h loggedHandle) Hold() func() {
	h.c.log("Hold")
	return func() {}
}

// TestWarmRequestManagerCalls: a warm request (a valid token, a running
// sandbox) takes its sandbox's handle once and asks it three times: once
// for what the manager knows (decide's Snapshot), once for the endpoint
// (ensure) and once to note activity when the exchange ended, on every
// front end: the lean loop, net/http's HTTP/1.1 and HTTP/2. A stream
// holds the sandbox instead of touching it. The first request's new
// upstream connection is confirmed (Confirm); the warm one reuses it and
// confirms nothing (#37: no runtime call on the warm path).
func TestWarmRequestManagerCalls(t *testing.T) {
	t.Parallel()
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		io.WriteString(w, okResponse("app"))
		return true
	})
	ep := sandboxmgr.Endpoint{ID: "abc", Addr: addr, Template: "app", Instance: "i1"}
	for _, tc := range []struct {
		name   string
		accept string
		want   []string
	}{
		{"plain", "*/*", []string{"Sandbox", "Snapshot", "Ensure", "Touch"}},
		{"stream", "text/event-stream", []string{"Sandbox", "Snapshot", "Ensure", "Hold"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &callLog{ep: ep}
			check := func(t *testing.T, get func() (int, string)) {
				for i := range 2 { // the first warms the token cache and the pool
					first := c.take()
					if i == 1 && !slices.Contains(first, "Confirm") {
						t.Errorf("the first request's new connection was not confirmed: %v", first)
					}
					if code, body := get(); code != 200 || body != "app" {
						t.Fatalf("got %d %q, want 200 %q", code, body, "app")
					}
				}
				if got := c.take(); !slices.Equal(got, tc.want) {
					t.Errorf("a warm request called the manager %d times: %v, want %v", len(got), got, tc.want)
				}
			}
			onBothLoops(t, c, nil, func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
				tok := testkit.Mint(t, cfg, "abc", time.Hour)
				check(t, func() (int, string) {
					resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok, "Accept", tc.accept)
					body, _ := io.ReadAll(resp.Body)
					return resp.StatusCode, string(body)
				})
			})
			t.Run("h2", func(t *testing.T) {
				cfg := testConfig()
				g, err := New(cfg, c, Options{TLS: true}, testkit.Logger(t))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(g.Close)
				s := NewServer(cfg, g, testkit.Logger(t))
				s.TLSConfig = testkit.TLSConfig("h2")
				srv := serve(t, s)
				tr := &http2.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
				t.Cleanup(tr.CloseIdleConnections)
				tok := testkit.Mint(t, cfg, "abc", time.Hour)
				check(t, func() (int, string) {
					req, _ := http.NewRequest("GET", "https://"+srv.Listener.Addr().String()+"/", nil)
					req.Host = "sandbox-abc." + testDomain
					req.Header.Set("Authorization", "Bearer "+tok)
					req.Header.Set("Accept", tc.accept)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					body, _ := io.ReadAll(resp.Body)
					return resp.StatusCode, string(body)
				})
			})
		})
	}
}
