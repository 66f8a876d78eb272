package admin_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// kubeLike is a runtime without pause, and one running sandbox with
// metadata.
type kubeLike struct{ noSandboxes }

func (kubeLike) Pause(context.Context, string) error { return sandboxmgr.ErrNoPause }
func (kubeLike) List(context.Context) ([]sandboxmgr.Info, error) {
	return []sandboxmgr.Info{{ID: "a", State: "running", Metadata: map[string]string{"user": "u1"}}, {ID: "b", State: "running"}}, nil
}
func (k kubeLike) Get(ctx context.Context, id string) (sandboxmgr.Info, error) {
	list, _ := k.List(ctx)
	for _, s := range list {
		if s.ID == id {
			return s, nil
		}
	}
	return sandboxmgr.Info{}, runtime.ErrNotFound
}

// The API's answers that need no runtime (#23): pause where the runtime
// has none is a 409 with code pause_unsupported that says to stop; bad
// metadata and bad filters are 400s naming the problem; the filter ANDs.
func TestSandboxAPIAnswers(t *testing.T) {
	t.Parallel()
	l := newLiveConfig(t, kubeLike{}, testkit.ConfigFile(nil))
	resp, body := adminDo(t, l.admin, "POST", "/admin/sandboxes/a/pause", testkit.AdminToken, nil)
	if resp.StatusCode != 409 || !strings.Contains(string(body), `"code":"pause_unsupported"`) || !strings.Contains(string(body), "stop") {
		t.Errorf("pause on a runtime without pause: got %d %s", resp.StatusCode, body)
	}
	for _, c := range []struct{ body, want string }{
		{`{"metadata":{"User":"x"}}`, "bad_metadata"},
		{`{"metadata":{"user":"a b"}}`, "bad_metadata"},
		{`{"metadata":{"k":1}}`, "bad_request"},
	} {
		resp, body := adminDo(t, l.admin, "PUT", "/admin/sandboxes/x", testkit.AdminToken, []byte(c.body))
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":"`+c.want+`"`) {
			t.Errorf("PUT %s: got %d %s, want 400 %s", c.body, resp.StatusCode, body, c.want)
		}
	}
	// An unknown template is named with the ones there are.
	if resp, body := adminDo(t, l.admin, "PUT", "/admin/sandboxes/x", testkit.AdminToken, []byte(`{"template":"next"}`)); resp.StatusCode != 400 ||
		!strings.Contains(string(body), `"code":"unknown_template"`) || !strings.Contains(string(body), `(templates: app)`) {
		t.Errorf("PUT an unknown template: got %d %s, want 400 unknown_template naming app", resp.StatusCode, body)
	}
	for q, want := range map[string]int{"?metadata.user=u1": 200, "?metadata.user=u1&metadata.user=u2": 400, "?metadata.a%2Fb=x": 400,
		"?metdata.user=u1": 400, "?user=u1": 400} {
		if resp, _ := adminDo(t, l.admin, "GET", "/admin/sandboxes"+q, testkit.AdminToken, nil); resp.StatusCode != want {
			t.Errorf("list%s: got %d, want %d", q, resp.StatusCode, want)
		}
	}
	_, body = adminDo(t, l.admin, "GET", "/admin/sandboxes?metadata.user=u1", testkit.AdminToken, nil)
	if !strings.Contains(string(body), `"id":"a"`) || strings.Contains(string(body), `"id":"b"`) {
		t.Errorf("filter user=u1: got %s, want a only", body)
	}
	if resp, body := adminDo(t, l.admin, "GET", "/admin/sandboxes/a/requests", testkit.AdminToken, nil); resp.StatusCode != 200 || !strings.Contains(string(body), `"requests":[]`) {
		t.Errorf("requests without a log: got %d %s", resp.StatusCode, body)
	}
}

// neverReady has one sandbox, abc of template, that never gets ready: a
// wake waits until the API gives up on it.
type neverReady struct {
	noSandboxes
	template string
}

func (f neverReady) Get(_ context.Context, id string) (sandboxmgr.Info, error) {
	return sandboxmgr.Info{ID: id, Template: f.template, State: "paused"}, nil
}

func (neverReady) Resume(ctx context.Context, _ string) (sandboxmgr.Endpoint, error) {
	<-ctx.Done()
	return sandboxmgr.Endpoint{}, ctx.Err()
}

func (neverReady) EnsureWith(ctx context.Context, _ string, _ *config.Template, _ sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	<-ctx.Done()
	return sandboxmgr.Endpoint{}, ctx.Err()
}

// TestWakeCallsWaitTheReadyTimeout: resume waits for a sandbox as long
// as PUT does, its template's ready timeout plus 30 s, and then answers
// 504 not_ready; a sandbox whose template the config no longer has, the
// default ready timeout plus 30 s (its wake's bound). Resume gave up
// after a fixed 5 min while the wake of a template with a longer ready
// timeout went on. In fake time: only the sandboxes never get ready.
func TestWakeCallsWaitTheReadyTimeout(t *testing.T) {
	const slow = 45 * time.Minute // longer than resume's old 5 min
	def := config.DefaultTemplateSettings().Ready.Timeout.D()
	for _, tc := range []struct {
		name, method, path, body, template string
		want                               time.Duration
	}{
		{"PUT", "PUT", "/admin/sandboxes/abc", `{"template": "slow"}`, "slow", slow + 30*time.Second},
		{"resume", "POST", "/admin/sandboxes/abc/resume", "", "slow", slow + 30*time.Second},
		{"resume, template gone", "POST", "/admin/sandboxes/abc/resume", "", "gone", def + 30*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := config.Default()
				cfg.AdminToken = testkit.AdminToken
				cfg.Templates["slow"] = &config.Template{Image: "app:1", Ready: config.Ready{Timeout: config.Duration(slow)}}
				h := newAdmin(t, admin.Options{Config: func() *config.Config { return cfg }, Sandboxes: neverReady{template: tc.template}})
				req := httptest.NewRequest(tc.method, "http://127.0.0.1:9090"+tc.path, strings.NewReader(tc.body))
				req.Header.Set("Authorization", "Bearer "+testkit.AdminToken)
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				if took := time.Since(t0); rec.Code != 504 || !strings.Contains(rec.Body.String(), `"not_ready"`) || took != tc.want {
					t.Errorf("%s %s: %d %s after %s; want 504 not_ready after %s", tc.method, tc.path, rec.Code, rec.Body, took, tc.want)
				}
			})
		})
	}
}
