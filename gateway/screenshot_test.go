package gateway

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestScreenshots writes the waiting and failure pages as PNGs to
// $PREVIEWGATE_SCREENSHOTS (the README's docs/ images); skipped without it.
func TestScreenshots(t *testing.T) {
	dir := browsertest.ScreenshotDir(t)
	e := newDockerEnv(t, func(c *config.Config) {
		c.Domains = config.StringList{"localhost"}
		c.Templates["app"].Env = map[string]string{"LISTEN_DELAY": "6s"}
		c.Templates["app"].Ready.Timeout = config.Duration(60 * time.Second)
		crash := *c.Templates["app"]
		crash.Name = "crash"
		crash.Env = map[string]string{"CRASH": "Error: Cannot find module './missing'\nRequire stack:\n- /app/src/pages/index.tsx\n" +
			"    at Module._resolveFilename (node:internal/modules/cjs/loader:1145:15)\n    at Module._load (node:internal/modules/cjs/loader:986:27)\n" +
			"    at Module.require (node:internal/modules/cjs/loader:1233:19)\n    at require (node:internal/modules/helpers:179:18)\n" +
			"    at Object.<anonymous> (/app/src/pages/index.tsx:3:15) {\n  code: 'MODULE_NOT_FOUND'\n}\n\nNode.js v20.11.1"}
		c.Templates["crash"] = &crash
	})
	ctx := browsertest.New(t, 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(900, 620)); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	// One wake first, so the page knows the template's typical time.
	if _, err := e.mgr.Ensure(t.Context(), dockertest.UniqueID("warmup"), e.cfg.Templates["app"]); err != nil {
		t.Fatal(err)
	}
	id := dockertest.UniqueID("shot")
	tok := testkit.Mint(t, e.cfg, id, 10*time.Minute)
	browsertest.Navigate(t, ctx, fmt.Sprintf("http://sandbox-%s.localhost:%s/?access_token=%s", id, port, tok))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("logs") && document.getElementById("logs").textContent.length > 0`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	browsertest.SaveScreenshot(t, ctx, dir, "waiting-page.png")

	id = dockertest.UniqueID("shotcrash")
	tokCrash, err := auth.Mint(e.cfg.Auth.Keys[0], auth.MintOptions{Subject: "tester", Sandbox: id, Template: "crash",
		Issuer: "test", Audience: e.cfg.Auth.Audience, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Navigate(t, ctx, fmt.Sprintf("http://sandbox-%s.localhost:%s/?access_token=%s", id, port, tokCrash))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("main").className === "failed"`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatal(err)
	}
	browsertest.SaveScreenshot(t, ctx, dir, "failure-page.png")
}
