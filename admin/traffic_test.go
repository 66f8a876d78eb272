package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
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
	return sandboxmgr.Info{}, sandboxmgr.ErrNoContainer
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
