package admin_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// signIn opens the admin page at base in the browser of ctx (starting it:
// ctx owns it) and signs in with the admin token.
func signIn(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	browsertest.Navigate(t, ctx, base+"/ui/")
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.SendKeys("#token", testkit.AdminToken),
		chromedp.Submit("#token"),
		chromedp.WaitVisible("#sandboxes"),
	} {
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := chromedp.Do(sctx, step)
		cancel()
		if err != nil {
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
			t.Fatalf("sign in, step %d: %v\n%.2000s", i, err, html)
		}
	}
}

// The rest of the admin page (#16) in Chromium against real Docker: a
// sandbox's page shows its recent output; Remove deletes its container;
// the config form validates, refuses a broken edit and applies the
// running config unchanged (REDACTED values and all).
func TestBrowserAdminPageDetailRemoveConfig(t *testing.T) {
	e := newDockerEnv(t)
	ctx := browsertest.New(t, 90*time.Second, chromedp.WindowSize(1200, 800))
	id := dockertest.UniqueID("page-rm")
	if _, err := e.mgr.Ensure(t.Context(), id, e.cfg.Templates["app"]); err != nil {
		t.Fatalf("ensure %s: %v", id, err)
	}
	// The page's config: one read from a file, as serve runs with (REDACTED
	// stands for the text the file holds).
	_, live := testkit.WriteConfig(t, testkit.ConfigFile(nil))
	var mu sync.Mutex
	var applied []string
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return live },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t),
		Replace: func(b []byte) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			applied = append(applied, string(b))
			return nil, nil
		}}))
	defer srv.Close()
	signIn(t, ctx, srv.URL)

	// The sandbox's own page, through its link. Docker delivers a
	// container's output asynchronously: reload until the line is there.
	if err := chromedp.Do(ctx, chromedp.Click(`tr[data-id="`+id+`"] a`), chromedp.WaitVisible("main h2")); err != nil {
		t.Fatalf("open the sandbox's page: %v", err)
	}
	testkit.WaitFor(t, "the app's output on the sandbox's page", func() bool {
		out, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("logs") || {}).textContent || ""`))
		if strings.Contains(out, "listening on :3000") {
			return true
		}
		chromedp.Do(ctx, chromedp.Reload())
		return false
	})

	if err := chromedp.Do(ctx, chromedp.Click(`form[action$="/remove"] button`), chromedp.WaitVisible("#notice")); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if notice, _ := chromedp.Run(ctx, chromedp.Text("#notice")); !strings.Contains(notice, "Removed sandbox "+id) {
		t.Errorf("got notice %q, want it to name the removed sandbox", notice)
	}
	if n := len(dockertest.Containers(t, e.cli, sandboxLabel(id))); n != 0 {
		t.Errorf("after Remove: %d containers, want none", n)
	}

	// The config form: the running config as shown applies unchanged.
	// Remove answered with the home page, which holds the form. (A plain
	// string is a text search: "textarea" would find the page's CSS.)
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err := chromedp.Do(actx, chromedp.WaitVisible(chromedp.CSS("textarea")), chromedp.Click(chromedp.CSS(`button[value="apply"]`)))
	cancel()
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	// The page shows Remove's notice until the answer replaces it; an
	// evaluation during the navigation fails: ask again.
	testkit.WaitFor(t, "the answer to apply", func() bool {
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`((document.getElementById("notice") || {}).textContent || "").startsWith("Applied") || document.getElementById("error") !== null`))
		return err == nil && done
	})
	if msg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("error") || {}).textContent || ""`)); err != nil || msg != "" {
		t.Fatalf("apply unchanged: got error %q (%v), want it applied", msg, err)
	}
	notice, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#notice")))
	mu.Lock()
	n := len(applied)
	mu.Unlock()
	if !strings.HasPrefix(notice, "Applied.") || n != 1 {
		t.Errorf("apply unchanged: notice %q, %d replacements; want Applied. and one", notice, n)
	}
	// A broken edit: refused, with the line, and nothing applied.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("textarea"), "domain: [\n"),
		chromedp.Click(`button[value="validate"]`), chromedp.WaitVisible("#error")); err != nil {
		t.Fatalf("validate a broken edit: %v", err)
	}
	msg, _ := chromedp.Run(ctx, chromedp.Text("#error"))
	mu.Lock()
	n = len(applied)
	mu.Unlock()
	if !strings.Contains(msg, "Not valid") || !strings.Contains(msg, ":1:") || n != 1 {
		t.Errorf("broken edit: error %q, %d replacements; want Not valid with a line, still one", msg, n)
	}
}
