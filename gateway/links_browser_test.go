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

func pageText(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
