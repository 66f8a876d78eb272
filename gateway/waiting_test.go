package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/pages"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

func TestIsNavigation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		method string
		hdr    []string
		want   bool
	}{
		{"fetch metadata navigate", "GET", []string{"Sec-Fetch-Mode", "navigate", "Accept", "text/html"}, true},
		{"fetch metadata cors", "GET", []string{"Sec-Fetch-Mode", "cors", "Accept", "text/html"}, false},
		{"old browser html", "GET", []string{"Accept", "text/html,application/xhtml+xml"}, true},
		{"api client", "GET", []string{"Accept", "application/json"}, false},
		{"post form", "POST", []string{"Sec-Fetch-Mode", "navigate"}, false},
		{"websocket", "GET", []string{"Sec-Fetch-Mode", "websocket", "Upgrade", "websocket"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/", nil)
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				r.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			if got := isNavigation(r); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// notReady knows no ready sandbox: a navigation gets the waiting
// page, and the wake it starts is counted.
type notReady struct{ fakeSandboxes }

func (c *notReady) Cached(string) (sandboxmgr.Endpoint, bool) { return sandboxmgr.Endpoint{}, false }

// TestWaitingPageFrontEnds: a browser navigation to a cold sandbox gets
// the waiting page at once, and starts one wake, on both front ends (the
// lean loop serves it now: it serves whatever ServeHTTP decides).
func TestWaitingPageFrontEnds(t *testing.T) {
	t.Parallel()
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Templates["app"].ColdStart = config.ColdStartWaitingPage
			sb := &notReady{fakeSandboxes{addrs: []string{testkit.DeadAddr(t)}}}
			_, srv := startGatewayOpts(t, cfg, sb, Options{NetHTTPOnly: fe.netHTTPOnly})
			resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", testkit.Mint(t, cfg, "abc", time.Minute),
				"Sec-Fetch-Mode", "navigate", "Accept", "text/html")
			var b strings.Builder
			io.Copy(&b, resp.Body)
			if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(b.String(), pages.StatusPath) {
				t.Fatalf("got %d %q %.80q, want the waiting page", resp.StatusCode, resp.Header.Get("Content-Type"), b.String())
			}
			if n := sb.lookups.Load(); n != 1 || sb.ensures.Load() != 0 {
				t.Errorf("got %d wake calls and %d ensures, want 1 wake and no wait", n, sb.ensures.Load())
			}
		})
	}
}

// A navigation to a cold sandbox gets the waiting page at once; its status
// stream reports phases up to ready; API clients keep blocking.
func TestDockerWaitingPageAndStatus(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) {
		c.Templates["app"].Env = map[string]string{"LISTEN_DELAY": "1s"}
	})
	id := dockertest.UniqueID("wait")
	host := "sandbox-" + id + "." + testDomain
	tok := testkit.Mint(t, e.cfg, id, time.Minute)

	resp := testkit.Request(t, e.srv, "GET", host, "/", tok, "Sec-Fetch-Mode", "navigate", "Accept", "text/html")
	body := wantStatus(t, resp, 200)
	if !strings.Contains(string(body), pages.StatusPath) || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("got %q, want the waiting page", body)
	}

	resp = testkit.Request(t, e.srv, "GET", host, pages.StatusPath, tok, "Accept", "text/event-stream")
	sc := bufio.NewScanner(resp.Body)
	var phases []string
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev pages.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("status event %q: %v", line, err)
		}
		phases = append(phases, ev.Phase)
	}
	if len(phases) == 0 || phases[len(phases)-1] != sandboxmgr.PhaseReady {
		t.Fatalf("got phases %v, want them to end with ready", phases)
	}
	// Now ready: the navigation is proxied to the app.
	resp = testkit.Request(t, e.srv, "GET", host, "/hello", tok, "Sec-Fetch-Mode", "navigate", "Accept", "text/html")
	if body := wantStatus(t, resp, 200); !strings.Contains(string(body), `"path":"/hello"`) {
		t.Fatalf("got %s, want the app's echo", body)
	}
	// The request log has what the user saw, the waiting page included,
	// and not the page's own status stream.
	var got []string
	for _, q := range e.traffic.Last(id, 32) {
		got = append(got, fmt.Sprint(q.Status, " ", q.Path))
	}
	if want := []string{"200 /hello", "200 /"}; !slices.Equal(got, want) {
		t.Errorf("request log: got %q, want %q (newest first)", got, want)
	}
}

// TestBrowserWaitingPage: chromium navigates to a cold sandbox whose app
// listens only after 6s; it sees the waiting page with the app's output
// so far (#16: what a dev server prints while it compiles), then the
// app's page without a manual reload.
func TestBrowserWaitingPage(t *testing.T) {
	t.Parallel() // most of it waits for the app's LISTEN_DELAY
	e := newDockerEnv(t, func(c *config.Config) {
		c.Domains = config.StringList{"localhost"}
		c.Templates["app"].Env = map[string]string{"LISTEN_DELAY": "6s"}
	})
	ctx := browsertest.New(t, 90*time.Second)
	_, port, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	id := dockertest.UniqueID("waitpage")
	tok := testkit.Mint(t, e.cfg, id, 10*time.Minute)
	preview := fmt.Sprintf("http://sandbox-%s.localhost:%s", id, port)

	browsertest.Navigate(t, ctx, preview+"/page?access_token="+tok)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("phases") !== null`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("waiting page not shown: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(document.getElementById("logs") || {}).textContent.includes("compiling for 6s before listening")`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Errorf("the waiting page did not show the app's output while it started: %v", err)
	}
	// While the app compiles, the phases before it show how long they took.
	if took, err := chromedp.Run(ctx, chromedp.Poll[string](`Array.from(document.querySelectorAll("#phases li span")).map(s => s.textContent).join("") || null`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil || !strings.HasSuffix(took, " s") {
		t.Errorf("the waiting page showed no phase durations (%q, %v)", took, err)
	}
	// The reload interrupts a poll in flight ("target navigated"): poll again.
	var got string
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		got, err = chromedp.Run(ctx, chromedp.Poll[string](`(document.getElementById("app") || {}).textContent || null`,
			chromedp.WithPollingTimeout(10*time.Second)))
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("the app's page did not replace the waiting page: %v", err)
		}
	}
	if got != "testapp page" {
		t.Errorf("got %q, want the testapp page", got)
	}
}
