package admin_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// The admin page shows a sandbox's settings and share links, and revokes
// a link (#23), in Chromium against real Docker: the list says public and
// kept up as the API set them, the sandbox's page lists both links, and
// its Revoke button revokes exactly the one clicked, as the API then
// reports.
func TestBrowserAdminPageSettingsAndLinks(t *testing.T) {
	e := newDockerEnv(t)
	ctx := browsertest.New(t, 90*time.Second, chromedp.WindowSize(1200, 800))
	e.cfg.AdminToken = testkit.AdminToken
	id := dockertest.UniqueID("page-links")
	if _, err := e.mgr.Ensure(t.Context(), id, e.cfg.Templates["app"]); err != nil {
		t.Fatalf("ensure %s: %v", id, err)
	}
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()

	if resp, body := adminDo(t, srv, "PATCH", "/admin/sandboxes/"+id, testkit.AdminToken, []byte(`{"public": true, "keep_up": "1h"}`)); resp.StatusCode != 200 {
		t.Fatalf("PATCH settings: %d %s", resp.StatusCode, body)
	}
	var links []string
	for _, path := range []string{"/", "/docs"} {
		resp, body := adminDo(t, srv, "POST", "/admin/sandboxes/"+id+"/links", testkit.AdminToken, []byte(`{"ttl": "10m", "path": "`+path+`"}`))
		var l adminapi.Link
		if json.Unmarshal(body, &l); resp.StatusCode != 201 || l.ID == "" {
			t.Fatalf("POST link: %d %s", resp.StatusCode, body)
		}
		links = append(links, l.ID)
	}

	// The list: its own settings, as every replica's list says them.
	_, body := adminDo(t, srv, "GET", "/admin/sandboxes", testkit.AdminToken, nil)
	var list []adminapi.Sandbox
	json.Unmarshal(body, &list)
	found := false
	for _, s := range list {
		if s.ID == id {
			found = true
			if s.PublicSetting == nil || !*s.PublicSetting || s.KeepUpUntil.IsZero() || s.LiveLinks != 2 {
				t.Errorf("list: %+v, want public_setting true, a keep-up and 2 live links", s)
			}
		}
	}
	if !found {
		t.Fatalf("list lacks %s: %s", id, body)
	}

	signIn(t, ctx, srv.URL)
	browsertest.Navigate(t, ctx, srv.URL+"/ui/sandboxes/"+id, chromedp.WaitVisible("#links"))
	settings, _ := chromedp.Run(ctx, chromedp.Text("#settings"))
	if !strings.Contains(settings, "public: yes (its own setting)") || !strings.Contains(settings, "kept up until") || !strings.Contains(settings, "2 live") {
		t.Errorf("settings line %q: want public yes, the keep-up and 2 live links", settings)
	}
	table, _ := chromedp.Run(ctx, chromedp.Text("#links"))
	for _, l := range links {
		if !strings.Contains(table, l) {
			t.Errorf("links table %q lacks link %s", table, l)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(`form[action$="/links/`+links[1]+`/revoke"] button`), chromedp.WaitVisible("#notice")); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if notice, _ := chromedp.Run(ctx, chromedp.Text("#notice")); !strings.Contains(notice, "Revoked a share link of sandbox "+id) {
		t.Errorf("got notice %q, want it to name the sandbox", notice)
	}
	_, body = adminDo(t, srv, "GET", "/admin/sandboxes/"+id+"/links", testkit.AdminToken, nil)
	var got struct {
		Links []struct {
			ID      string
			Revoked *time.Time
		}
	}
	json.Unmarshal(body, &got)
	revoked := map[string]bool{}
	for _, l := range got.Links {
		revoked[l.ID] = l.Revoked != nil
	}
	if len(revoked) != 2 || revoked[links[0]] || !revoked[links[1]] {
		t.Errorf("after revoking %s on the page: %s, want only it revoked", links[1], body)
	}
}
