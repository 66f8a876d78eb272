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

// callLog is a running sandbox's manager that logs every call
// the gateway makes. Any method it does not override is the nil
// interface's: a call the test did not expect panics.
type callLog struct {
	Sandboxes
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

func (c *callLog) Cached(string) (sandboxmgr.Endpoint, bool) {
	c.log("Cached")
	return c.ep, true
}
func (c *callLog) Known(string) (string, bool) {
	c.log("Known")
	return c.ep.Template, true
}
func (c *callLog) FreshSettings(string) (sandboxmgr.Settings, bool) {
	c.log("FreshSettings")
	return sandboxmgr.Settings{}, true
}
func (c *callLog) EnsureWith(context.Context, string, *config.Template, sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	c.log("EnsureWith")
	return c.ep, nil
}
func (c *callLog) Touch(string) { c.log("Touch") }
func (c *callLog) Hold(string) func() {
	c.log("Hold")
	return func() {}
}

// snapshotLog is callLog with the manager's one-read
// snapshot (Snapshotter), as the sandbox manager is to offer it.
type snapshotLog struct{ *callLog }

func (s snapshotLog) Snapshot(string) Snapshot {
	s.log("Snapshot")
	return Snapshot{Template: s.ep.Template, Known: true, Fresh: true, Endpoint: s.ep, Ready: true}
}

// TestWarmRequestManagerCalls: a warm request (a valid token, a running
// sandbox) asks the manager once for what it knows (decide), once for
// the endpoint (ensure) and once to note activity, on every front end:
// the lean loop, net/http's HTTP/1.1 and HTTP/2.
// Without the manager's snapshot, decide reads it in two calls.
func TestWarmRequestManagerCalls(t *testing.T) {
	t.Parallel()
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		io.WriteString(w, okResponse("app"))
		return true
	})
	ep := sandboxmgr.Endpoint{ID: "abc", Addr: addr, Template: "app", Instance: "i1"}
	for _, tc := range []struct {
		name string
		sb   func(*callLog) Sandboxes
		want []string
	}{
		{"snapshot", func(c *callLog) Sandboxes { return snapshotLog{c} },
			[]string{"Snapshot", "EnsureWith", "Touch"}},
		{"without snapshot", func(c *callLog) Sandboxes { return c },
			[]string{"Cached", "FreshSettings", "EnsureWith", "Touch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &callLog{ep: ep}
			check := func(t *testing.T, get func() (int, string)) {
				for range 2 { // the first warms the token cache and the pool
					c.take()
					if code, body := get(); code != 200 || body != "app" {
						t.Fatalf("got %d %q, want 200 %q", code, body, "app")
					}
				}
				if got := c.take(); !slices.Equal(got, tc.want) {
					t.Errorf("a warm request called the manager %d times: %v, want %v", len(got), got, tc.want)
				}
			}
			onBothLoops(t, tc.sb(c), nil, func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
				tok := testkit.Mint(t, cfg, "abc", time.Hour)
				check(t, func() (int, string) {
					resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok)
					body, _ := io.ReadAll(resp.Body)
					return resp.StatusCode, string(body)
				})
			})
			t.Run("h2", func(t *testing.T) {
				cfg := testConfig()
				g, err := New(cfg, tc.sb(c), Options{TLS: true}, testkit.Logger(t))
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
