package admin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
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
)

// listOnly answers the page's sandbox calls without Docker.
type listOnly struct {
	noSandboxes
	stopped *[]string
}

func (l listOnly) List(context.Context) ([]sandboxmgr.Info, error) {
	return []sandboxmgr.Info{{ID: "abc", Template: "app", State: "running", StartedAt: time.Now().Add(-time.Minute)}}, nil
}
func (l listOnly) Stop(_ context.Context, id string) error {
	*l.stopped = append(*l.stopped, id)
	return nil
}
func (listOnly) PoolSize(string) int { return 0 }

// The admin page's session and CSRF rules: the token opens a session
// (HttpOnly, SameSite=Strict cookie); a POST needs that session, the
// session's CSRF token and the page's origin; an API token or a forged
// cookie opens nothing.
func TestAdminPageSessionAndCSRF(t *testing.T) {
	t.Parallel()
	var stopped []string
	cfg := &config.Config{AdminToken: testkit.AdminToken, Templates: map[string]*config.Template{}, APITokens: []config.APIToken{{Token: "backend-api-token-0123456789", Scopes: []string{"sandboxes"}}}}
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return cfg },
		Sandboxes: listOnly{stopped: &stopped}, Log: testkit.Logger(t)}))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar}
	post := func(path, origin string, form url.Values) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	get := func(path string) string {
		t.Helper()
		resp, err := cl.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}

	for _, tok := range []string{"wrong", "backend-api-token-0123456789"} {
		if resp := post("/ui/login", srv.URL, url.Values{"token": {tok}}); resp.StatusCode != 401 {
			t.Errorf("login with %q: got %d, want 401", tok, resp.StatusCode)
		}
	}
	if resp := post("/ui/login", "http://evil.example", url.Values{"token": {testkit.AdminToken}}); resp.StatusCode != 403 {
		t.Errorf("cross-origin login: got %d, want 403", resp.StatusCode)
	}
	if resp := post("/ui/login", srv.URL, url.Values{"token": {testkit.AdminToken}}); resp.StatusCode != 200 {
		t.Fatalf("login: got %d, want 200 after the redirect", resp.StatusCode)
	}
	u, _ := url.Parse(srv.URL + "/ui/")
	cookies := jar.Cookies(u)
	if len(cookies) != 1 {
		t.Fatalf("got %d cookies, want the session", len(cookies))
	}
	// The jar hides the attributes: read them from a fresh login.
	req, _ := http.NewRequest("POST", srv.URL+"/ui/login", strings.NewReader("token="+testkit.AdminToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	resp, _ := http.DefaultTransport.RoundTrip(req)
	resp.Body.Close()
	sc := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("got Set-Cookie %q, want %s", sc, want)
		}
	}

	page := get("/ui/")
	if !strings.Contains(page, `data-id="abc"`) {
		t.Fatalf("page does not list the sandbox:\n%.500s", page)
	}
	i := strings.Index(page, `name="csrf" value="`)
	csrf := page[i+len(`name="csrf" value="`):]
	csrf = csrf[:strings.IndexByte(csrf, '"')]

	for _, c := range []struct {
		name, origin, csrf string
		want               int
	}{
		{"no csrf", srv.URL, "", 403},
		{"wrong csrf", srv.URL, strings.Repeat("0", len(csrf)), 403},
		{"cross origin", "http://evil.example", csrf, 403},
		{"no origin", "", csrf, 403},
	} {
		if resp := post("/ui/sandboxes/abc/stop", c.origin, url.Values{"csrf": {c.csrf}}); resp.StatusCode != c.want {
			t.Errorf("%s: got %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	if len(stopped) != 0 {
		t.Fatalf("refused POSTs stopped %v", stopped)
	}
	if resp := post("/ui/sandboxes/abc/stop", srv.URL, url.Values{"csrf": {csrf}}); resp.StatusCode != 200 || len(stopped) != 1 {
		t.Fatalf("stop: got %d, stopped %v; want 200 and abc stopped", resp.StatusCode, stopped)
	}

	// A forged cookie and another admin token's session open nothing.
	jar2, _ := cookiejar.New(nil)
	jar2.SetCookies(u, []*http.Cookie{{Name: "previewgate_admin", Value: "9999999999.00.00"}})
	cl.Jar = jar2
	if page := get("/ui/"); strings.Contains(page, `data-id="abc"`) {
		t.Error("a forged cookie opened the page")
	}
	cl.Jar = jar
	cfg = &config.Config{AdminToken: "another-admin-token-0123456789", Templates: map[string]*config.Template{}}
	if page := get("/ui/"); strings.Contains(page, `data-id="abc"`) {
		t.Error("a session outlived a change of admin_token")
	}
}

// Done means 3 (#16): in Chromium, sign in to the admin page with the
// token, see the sandboxes, stop one; Docker agrees.
func TestBrowserAdminPageStopsSandbox(t *testing.T) {
	e := newDockerEnv(t)
	ctx := browsertest.New(t, 60*time.Second, chromedp.WindowSize(1200, 800))
	e.cfg.AdminToken = testkit.AdminToken
	ids := []string{dockertest.UniqueID("page-a"), dockertest.UniqueID("page-b")}
	for _, id := range ids {
		if _, err := e.mgr.Ensure(t.Context(), id, e.cfg.Templates["app"]); err != nil {
			t.Fatalf("ensure %s: %v", id, err)
		}
	}
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()

	signIn(t, ctx, srv.URL)
	for _, id := range ids {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](
			`(document.querySelector('tr[data-id="`+id+`"] .st') || {}).textContent || ""`))
		if err != nil || state != "running" {
			t.Errorf("sandbox %s: page shows %q (%v), want running", id, state, err)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(`tr[data-id="`+ids[0]+`"] form[action$="/stop"] button`),
		chromedp.WaitVisible("#notice"),
	); err != nil {
		t.Fatalf("stop: %v", err)
	}
	notice, _ := chromedp.Run(ctx, chromedp.Text("#notice"))
	if !strings.Contains(notice, "Stopped sandbox "+ids[0]) {
		t.Errorf("got notice %q, want it to name the stopped sandbox", notice)
	}
	if st := dockertest.OnlyContainer(t, e.cli, sandboxLabel(ids[0])).State; st != "exited" {
		t.Errorf("after stop: Docker state %q, want exited", st)
	}
	if st := dockertest.OnlyContainer(t, e.cli, sandboxLabel(ids[1])).State; st != "running" {
		t.Errorf("the other sandbox: Docker state %q, want running", st)
	}
	state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](
		`(document.querySelector('tr[data-id="`+ids[0]+`"] .st') || {}).textContent || ""`))
	if state != "exited" {
		t.Errorf("page shows %q for the stopped sandbox, want exited", state)
	}
}

// failedList lists one sandbox whose last start failed.
type failedList struct{ listOnly }

func (failedList) Logs(context.Context, string, int) ([]string, error) { return nil, nil }

func (failedList) List(context.Context) ([]sandboxmgr.Info, error) {
	code := 1
	return []sandboxmgr.Info{{ID: "abc", Template: "app", State: "exited",
		LastFailure: &sandboxmgr.Failure{Reason: sandboxmgr.ReasonExited, ExitCode: &code, At: time.Now().Add(-time.Minute)}}}, nil
}

// TestAdminPageShowsLastFailure: the page and the API list say why a
// sandbox's last start failed, with the exit code (#24, 6).
func TestAdminPageShowsLastFailure(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{AdminToken: testkit.AdminToken, Templates: map[string]*config.Template{}}
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return cfg },
		Sandboxes: failedList{}, Log: testkit.Logger(t)}))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar}
	req, _ := http.NewRequest("POST", srv.URL+"/ui/login", strings.NewReader("token="+testkit.AdminToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, path := range []string{"/ui/", "/ui/sandboxes/abc"} {
		resp, err := cl.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "last start failed: exited (exit code 1)"; !strings.Contains(string(b), want) {
			t.Errorf("%s: got %.800s, want %q", path, b, want)
		}
	}
	req, _ = http.NewRequest("GET", srv.URL+"/admin/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+testkit.AdminToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"last_failure":{"reason":"exited","exit_code":1`) {
		t.Errorf("GET /admin/sandboxes: got %s, want last_failure with reason and exit code", b)
	}
}

// imagesListOnly is listOnly with an engine that lacks every image.
type imagesListOnly struct{ listOnly }

func (imagesListOnly) Has(context.Context, string) (bool, error) { return false, nil }

// TestAdminPageShowsConfigWarnings: validating a config on the page shows
// what will fail later (a missing image) as warnings, and still says it is
// valid (#24, 3).
func TestAdminPageShowsConfigWarnings(t *testing.T) {
	t.Parallel()
	_, live := testkit.WriteConfig(t, testkit.ConfigFile(nil))
	var stopped []string
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return live },
		Sandboxes: imagesListOnly{listOnly{stopped: &stopped}}, Images: imagesListOnly{}, Log: testkit.Logger(t)}))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar}
	post := func(p string, form url.Values) string {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+p, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	page := post("/ui/login", url.Values{"token": {testkit.AdminToken}})
	i := strings.Index(page, `name="csrf" value="`)
	if i < 0 {
		t.Fatalf("no csrf on the page:\n%.500s", page)
	}
	csrf := page[i+len(`name="csrf" value="`):]
	csrf = csrf[:strings.IndexByte(csrf, '"')]
	page = post("/ui/config", url.Values{"csrf": {csrf}, "action": {"validate"}, "config": {testkit.ConfigFile(nil)}})
	if !strings.Contains(page, "Valid.") || !strings.Contains(page, `id="warnings"`) ||
		!strings.Contains(page, "templates.app: image testapp is not on the engine") {
		t.Errorf("got %.2000s\nwant Valid. and the missing image among the warnings", page)
	}
}
