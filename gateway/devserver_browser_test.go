package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// devDomain is a preview domain that is not localhost: a dev server's
// own localhost allowances cannot hide a host problem there (#22).
const devDomain = "preview.example"

// startDevServer builds testdata/devserver once per test and runs it with
// rule (vite or next) on a loopback port; it returns the address.
func startDevServer(t *testing.T, bin, rule string) string {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = []string{"RULE=" + rule, "ADDR=127.0.0.1:0"}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start devserver: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("devserver %s: %v", rule, err)
	}
	return strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:])
}

func buildDevServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "devserver")
	build := exec.Command("go", "build", "-o", bin, "./testdata/devserver")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/devserver: %v\n%s", err, out)
	}
	return bin
}

// idSandboxes hands out the endpoint named by a sandbox id's prefix.
type idSandboxes struct {
	fakeSandboxes
	addrs map[string]string // id prefix → address
}

func (s *idSandboxes) Ensure(ctx context.Context, id string, tpl *config.Template) (sandboxmgr.Endpoint, error) {
	for pfx, addr := range s.addrs {
		if strings.HasPrefix(id, pfx) {
			return sandboxmgr.Endpoint{ID: id, Addr: addr, Template: tpl.Name, Instance: "inst-" + pfx}, nil
		}
	}
	return sandboxmgr.Endpoint{}, runtime.ErrUnavailable
}

func (s *idSandboxes) EnsureWith(ctx context.Context, id string, tpl *config.Template, _ sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	return s.Ensure(ctx, id, tpl)
}

// TestBrowserStockDevServers: through the gateway on a non-localhost
// preview domain over TLS, with the default template settings, a dev
// server that enforces Vite's host rule and HMR token renders and
// hot-reloads, and one that enforces Next.js's origin rule on its HMR
// socket connects (and hot-reloads). With host_header: preserve, the
// default before #22, the Vite one answers every request 403 and the
// Next.js one refuses the HMR socket; with rewrite, Next.js still does.
func TestBrowserStockDevServers(t *testing.T) {
	bin := buildDevServer(t)
	ctx := browsertest.New(t, 120*time.Second,
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("host-resolver-rules", "MAP *."+devDomain+" 127.0.0.1"),
		chromedp.Flag("no-proxy-server", true))
	w := watchLoads(t, ctx)
	servers := map[string]string{"vite": startDevServer(t, bin, "vite"), "next": startDevServer(t, bin, "next")}

	for _, mode := range []string{"default", config.HostPreserve, config.HostRewrite} {
		cfg := testConfig()
		cfg.Domains = config.StringList{devDomain}
		if mode != "default" {
			cfg.Templates["app"].HostHeader = mode
		}
		if mode == "default" && cfg.Templates["app"].HostHeader != config.HostLocal {
			t.Fatalf("default host_header %q, want local", cfg.Templates["app"].HostHeader)
		}
		g, err := New(cfg, fakes(&idSandboxes{addrs: servers}), Options{TLS: true}, testkit.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		s := NewServer(cfg, g, testkit.Logger(t))
		s.TLSConfig = testkit.TLSConfig("h2", "http/1.1")
		srv := serve(t, s)
		_, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")

		for _, rule := range []string{"vite", "next"} {
			t.Run(mode+"/"+rule, func(t *testing.T) {
				id := rule + "-" + mode
				preview := fmt.Sprintf("https://sandbox-%s.%s:%s", id, devDomain, port)
				tok := testkit.Mint(t, cfg, id, 10*time.Minute)
				navigate(t, ctx, w, preview+"/?access_token="+tok)
				state := pollPage(t, ctx, w, `(() => {
  const app = document.getElementById("app");
  if (!app) return document.body ? "page: " + document.body.innerText.slice(0, 200) : null;
  if (window.__hmr === "connecting" || window.__hmr === undefined) return null;
  return app.textContent + " hmr " + window.__hmr;
})()`)
				// rewrite sends an IP as Host, which Vite accepts; the Origin
				// stays the preview's, which Next.js refuses.
				if works := mode == "default" || mode == config.HostRewrite && rule == "vite"; !works {
					// The app's own check refuses the preview.
					want := "rendered hmr error"
					if rule == "vite" {
						want = `page: Blocked request. This host ("sandbox-` + id + "." + devDomain + `") is not allowed.`
					}
					if !strings.HasPrefix(state, want) {
						t.Errorf("with host_header %s: got %q, want %q (the dev server refuses)", mode, state, want)
					}
					return
				}
				if state != "rendered hmr open" {
					t.Fatalf("got %q, want the app rendered and its HMR socket open", state)
				}
				// A redirect the app builds from Host (http://localhost:<port>/)
				// lands back on the preview, over https. (In rewrite mode it
				// leaves for the container's address.)
				if mode == "default" {
					navigate(t, ctx, w, preview+"/__redirect")
					if got := pollPage(t, ctx, w, `document.getElementById("app") && window.__hmr === "open" ? location.href : null`); got != preview+"/" {
						t.Errorf("after the app's redirect the browser is at %q, want %q", got, preview+"/")
					}
				}
				hotReload(t, ctx, w, servers[rule])
			})
		}
	}
}

// navigate loads url (browsertest.Navigate) with w's failed loads forgotten.
func navigate(t *testing.T, ctx context.Context, w *loadWatch, url string) {
	t.Helper()
	w.take()
	browsertest.Navigate(t, ctx, url)
}

// loadWatch keeps the loads Chromium failed on a tab since the last
// navigation. Chromium drops every connection, loopback ones too, with
// ERR_NETWORK_CHANGED when the host's interfaces change, which other
// tests' Docker networks and containers do at any moment (it failed a
// module load in CI, and does at will with networks created in a loop).
// A page that lost loads that way, and only that way, is reloaded;
// any other failed load is named in the failure.
type loadWatch struct {
	mu     sync.Mutex
	failed []string // Network.loadingFailed error texts
}

func watchLoads(t *testing.T, ctx context.Context) *loadWatch {
	t.Helper()
	w := &loadWatch{}
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventLoadingFailed); ok {
			w.mu.Lock()
			w.failed = append(w.failed, e.ErrorText)
			w.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// take returns the failed loads so far and forgets them.
func (w *loadWatch) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.failed
	w.failed = nil
	return f
}

// onlyNetworkChanged: loads failed, every one with ERR_NETWORK_CHANGED.
func onlyNetworkChanged(failed []string) bool {
	return len(failed) > 0 && !slices.ContainsFunc(failed, func(e string) bool { return !strings.Contains(e, "ERR_NETWORK_CHANGED") })
}

// pollPage evaluates expr until it gives a non-null string, for 20s,
// reloading the page (at most three times) if it lost loads only to a
// change of the host's interfaces (loadWatch).
func pollPage(t *testing.T, ctx context.Context, w *loadWatch, expr string) string {
	t.Helper()
	for reloads := 0; ; reloads++ {
		got, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingTimeout(20*time.Second)))
		if err == nil {
			return got
		}
		failed := w.take()
		if reloads < 3 && onlyNetworkChanged(failed) {
			t.Logf("the page lost %d load(s) to ERR_NETWORK_CHANGED (the host's interfaces changed): reloading it", len(failed))
			if _, err := chromedp.RunResponse(ctx, chromedp.Reload()); err == nil || browsertest.NetworkChanged(err) {
				continue
			}
		}
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
		t.Fatalf("polling %s: %v; failed loads %q; page: %s", expr, err, failed, html)
	}
}

// hotReload makes the dev server at addr push an edit and waits for the
// page to show it. A page that lost loads only to ERR_NETWORK_CHANGED
// (loadWatch) missed the update: it is reloaded, and once its HMR socket
// is open again the edit is pushed again (at most three times).
func hotReload(t *testing.T, ctx context.Context, w *loadWatch, addr string) {
	t.Helper()
	for tries := 0; ; tries++ {
		want := fmt.Sprintf("edit-%d", edit(t, addr))
		_, err := chromedp.Run(ctx, chromedp.Poll[string](`(t => t === "`+want+`" ? t : null)(document.getElementById("hmr").textContent)`,
			chromedp.WithPollingTimeout(20*time.Second)))
		if err == nil {
			return
		}
		failed := w.take()
		if tries < 3 && onlyNetworkChanged(failed) {
			t.Logf("the page lost %d load(s) to ERR_NETWORK_CHANGED during the update: reloading it and editing again", len(failed))
			if _, rerr := chromedp.RunResponse(ctx, chromedp.Reload()); rerr == nil || browsertest.NetworkChanged(rerr) {
				pollPage(t, ctx, w, `window.__hmr === "open" ? "open" : null`)
				continue
			}
		}
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("hmr").textContent`))
		t.Fatalf("after an edit the page shows %q, want %q (hot reload): %v; failed loads %q", got, want, err, failed)
	}
}

// edit makes the dev server at addr push an HMR update; it returns its
// sequence number.
func edit(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/__edit", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct{ Seq, Sockets int }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Sockets == 0 {
		t.Fatalf("edit: %+v %v, want an update pushed to an open socket", r, err)
	}
	return r.Seq
}
