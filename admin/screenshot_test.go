package admin_test

import (
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/traffic"
)

// TestScreenshots writes the admin page as a PNG to
// $PREVIEWGATE_SCREENSHOTS (the README's docs/ image); skipped without it.
func TestScreenshots(t *testing.T) {
	dir := browsertest.ScreenshotDir(t)
	e := newDockerEnv(t)
	ctx := browsertest.New(t, 60*time.Second, chromedp.WindowSize(1200, 800))
	e.cfg.AdminToken = testkit.AdminToken
	e.cfg.Path = "/etc/previewgate/previewgate.yaml"
	rec := traffic.New(traffic.Options{Replica: "gateway-0"})
	var busy string
	for i, id := range []string{"todo-app", "landing-page", "docs-preview"} {
		id += "-" + dockertest.UniqueID("s")[2:8]
		md := map[string]string{"user": []string{"u-1842", "u-77", "u-1842"}[i], "project": strings.Split(id, "-")[0]}
		if _, err := e.mgr.EnsureWith(t.Context(), id, e.cfg.Templates["app"], sandboxmgr.Options{Metadata: md}); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			busy = id
		}
	}
	// The page's traffic as a gateway records it (the gateway itself is
	// not in this test): a page load and its assets on one sandbox.
	client := netip.MustParseAddr("203.0.113.24")
	for _, q := range []struct {
		method, path string
		status       int
		ms           int
		out          int64
	}{{"GET", "/", 200, 41, 5120}, {"GET", "/_next/static/chunks/main-app.js", 200, 12, 184320}, {"GET", "/_next/static/css/app.css", 200, 3, 9216},
		{"GET", "/api/todos", 200, 18, 742}, {"POST", "/api/todos", 201, 25, 96}, {"GET", "/favicon.ico", 404, 1, 0}} {
		e.mgr.Sandbox(busy).Touch()
		rec.Record(busy, q.method, q.path, q.status, time.Duration(q.ms)*time.Millisecond, map[bool]int64{true: 64}[q.method == "POST"], q.out, client)
	}
	release := e.mgr.Sandbox(busy).Hold()
	defer release()
	list, _ := e.mgr.List(t.Context())
	for _, s := range list {
		if strings.HasPrefix(s.ID, "docs-preview") {
			e.mgr.Stop(t.Context(), s.ID)
		}
	}
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Traffic: rec, Log: testkit.Logger(t)}))
	defer srv.Close()
	// Its settings and share links, through the API: kept up for a
	// demo, a link for the team and one revoked.
	adminDo(t, srv, "PATCH", "/admin/sandboxes/"+busy, testkit.AdminToken, []byte(`{"keep_up": "2h"}`))
	for _, body := range []string{`{"ttl": "8h", "path": "/"}`, `{"ttl": "30m", "path": "/api"}`} {
		resp, b := adminDo(t, srv, "POST", "/admin/sandboxes/"+busy+"/links", testkit.AdminToken, []byte(body))
		if resp.StatusCode != 201 {
			t.Fatalf("POST link: %d %s", resp.StatusCode, b)
		}
		if strings.Contains(body, "/api") {
			var l struct{ ID string }
			json.Unmarshal(b, &l)
			adminDo(t, srv, "DELETE", "/admin/sandboxes/"+busy+"/links/"+l.ID, testkit.AdminToken, nil)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1100, 900)); err != nil {
		t.Fatal(err)
	}
	browsertest.Navigate(t, ctx, srv.URL+"/ui/")
	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", testkit.AdminToken), chromedp.Submit("#token"),
		chromedp.WaitVisible("#sandboxes")); err != nil {
		t.Fatal(err)
	}
	browsertest.SaveScreenshot(t, ctx, dir, "admin-page.png")
	browsertest.Navigate(t, ctx, srv.URL+"/ui/sandboxes/"+busy, chromedp.WaitVisible("#requests"))
	browsertest.SaveScreenshot(t, ctx, dir, "admin-sandbox.png")
}
