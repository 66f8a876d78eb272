package gateway

import (
	"context"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/pages"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestDockerShareLinkBrowser: in Chromium, a share link opens the preview
// at its path with nothing else (the cookie exchange included), a revoked
// one and an expired one show a page that says which, and the app never
// sees the grant.
func TestDockerShareLinkBrowser(t *testing.T) {
	cfg, mc := linkSetup(t)
	cfg.Domains = config.StringList{"preview.localhost"} // browsers keep Secure cookies of http://*.localhost
	var logs syncBuf
	r := startLinkReplica(t, cfg, mc, &logs)
	id := dockertest.UniqueID("brw")
	host := "sandbox-" + id + ".preview.localhost"
	if resp, _ := get(t, r.srv, host, "/", "Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute)); resp.StatusCode != 200 {
		t.Fatalf("create: got %d, want 200", resp.StatusCode)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.srv.URL, "http://"))
	open := func(pq string) string { return "http://" + host + ":" + port + pq }

	ctx := browsertest.New(t, 90*time.Second)
	pq, lid := mintLink(t, r.admin.URL, id, `{"ttl":"10m","path":"/echo"}`)
	browsertest.Navigate(t, ctx, open(pq))
	loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + location.search`))
	if err != nil {
		t.Fatal(err)
	}
	body := pageText(t, ctx)
	if loc != "/echo" || !strings.Contains(body, `"path":"/echo"`) || strings.Contains(body, "previewgate_link") || strings.Contains(body, lid) {
		t.Fatalf("opened link: at %q showing %s; want /echo, the app's answer, no grant", loc, body)
	}
	u, _ := url.Parse(open(pq))
	if strings.Contains(logs.String(), u.Query().Get("previewgate_link")) {
		t.Error("the grant is in the log")
	}

	if st, out := adminCall(t, r.admin.URL, "DELETE", "/admin/sandboxes/"+id+"/links/"+lid, ""); st != 200 {
		t.Fatalf("revoke: %d %v", st, out)
	}
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	body = pageText(t, ctx)
	if !strings.Contains(body, "revoked") {
		t.Errorf("revoked link in the browser: got %q, want a page saying it was revoked", body)
	}

	pq, _ = mintLink(t, r.admin.URL, id, `{"ttl":"1s"}`)
	time.Sleep(2100 * time.Millisecond)
	browsertest.Navigate(t, ctx, open(pq))
	body = pageText(t, ctx)
	if !strings.Contains(body, "expired") {
		t.Errorf("expired link in the browser: got %q, want a page saying it expired", body)
	}
	if dir := os.Getenv("PREVIEWGATE_SCREENSHOTS"); dir != "" {
		browsertest.SaveScreenshot(t, ctx, dir, "link-expired.png")
	}
}

// TestDockerShareLinkBrowserOtherReplica: in Chromium, a share link
// minted on one replica and opened at once on another, which has not read
// it yet, shows a page that tries again by itself and opens the preview
// after a moment, the user doing nothing (#37, 4: the replica no longer
// holds the request while it re-reads the record).
func TestDockerShareLinkBrowserOtherReplica(t *testing.T) {
	cfg, mc := linkSetup(t)
	cfg.Domains = config.StringList{"preview.localhost"} // browsers keep Secure cookies of http://*.localhost
	// Only the on-demand re-read, not a re-check, brings b the link
	// within this test.
	mc.RecheckEvery = time.Minute
	var logs syncBuf
	a, b := startLinkReplica(t, cfg, mc, &logs), startLinkReplica(t, cfg, mc, &logs)
	id := dockertest.UniqueID("brw2")
	host := "sandbox-" + id + ".preview.localhost"
	if resp, _ := get(t, a.srv, host, "/", "Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute)); resp.StatusCode != 200 {
		t.Fatalf("create: got %d, want 200", resp.StatusCode)
	}
	eventually(t, 10*time.Second, "replica b knows the sandbox", func() bool { _, ok := b.mgr.Known(id); return ok })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(b.srv.URL, "http://"))

	ctx := browsertest.New(t, 90*time.Second)
	pq, lid := mintLink(t, a.admin.URL, id, `{"ttl":"10m","path":"/echo"}`)
	browsertest.Navigate(t, ctx, "http://"+host+":"+port+pq)
	if body := pageText(t, ctx); !strings.Contains(body, "not known here yet") {
		t.Fatalf("opened at once on the other replica: showing %q, want the page that tries again", body)
	}
	// The page reloads itself; each reload interrupts a poll in flight
	// ("target navigated"): poll again. The bound is the page's own.
	var loc string
	deadline := time.Now().Add(time.Duration(pages.ReloadTries+5) * time.Second)
	for time.Now().Before(deadline) {
		got, err := chromedp.Run(ctx, chromedp.Poll[string](`location.pathname === "/echo" && document.body && document.body.innerText.includes('"path":"/echo"') ? location.pathname : null`,
			chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			loc = got
			break
		}
	}
	body := pageText(t, ctx)
	if loc != "/echo" || strings.Contains(body, "previewgate_link") || strings.Contains(body, lid) {
		t.Fatalf("after the page tried again: at %q showing %s; want /echo, the app's answer, no grant", loc, body)
	}
}

func pageText(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
