package admin_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestScreenshots writes the admin page as a PNG to
// $PREVIEWGATE_SCREENSHOTS (the README's docs/ image); skipped without it.
func TestScreenshots(t *testing.T) {
	dir := browsertest.ScreenshotDir(t)
	ctx := browsertest.New(t, 60*time.Second, chromedp.WindowSize(1200, 800))
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	e.cfg.Path = "/etc/previewgate/previewgate.yaml"
	for _, id := range []string{"todo-app", "landing-page", "docs-preview"} {
		if _, err := e.mgr.Ensure(t.Context(), id+"-"+dockertest.UniqueID("s")[2:8], e.cfg.Templates["app"]); err != nil {
			t.Fatal(err)
		}
	}
	list, _ := e.mgr.List(t.Context())
	if len(list) > 0 {
		e.mgr.Stop(t.Context(), list[0].ID)
	}
	srv := httptest.NewServer(admin.New(admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Log: testkit.Logger(t)}))
	defer srv.Close()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1100, 900), chromedp.Navigate(srv.URL+"/ui/")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", testkit.AdminToken), chromedp.Submit("#token"),
		chromedp.WaitVisible("#sandboxes")); err != nil {
		t.Fatal(err)
	}
	browsertest.SaveScreenshot(t, ctx, dir, "admin-page.png")
}
