package admin_test

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// countingSandboxes counts the calls that change a sandbox, and answers
// the reads the calls below make.
type countingSandboxes struct {
	noSandboxes
	changes *atomic.Int32
}

func (s countingSandboxes) Stop(context.Context, string) error { s.changes.Add(1); return nil }
func (s countingSandboxes) Remove(context.Context, string) error {
	s.changes.Add(1)
	return nil
}
func (s countingSandboxes) Logs(_ context.Context, _ string, _ int, _ bool, w io.Writer) error {
	_, err := io.WriteString(w, "line\n")
	return err
}
func (s countingSandboxes) List(context.Context) ([]sandboxmgr.Info, error) {
	return nil, nil
}
func (s countingSandboxes) Get(_ context.Context, id string) (sandboxmgr.Info, error) {
	return sandboxmgr.Info{ID: id, State: "running"}, nil
}

// A query parameter a call does not read is a 400 naming it and what the
// call takes, and the call does nothing (#24: nothing fails silently): a
// misspelt ?folow=1 answered the last lines as if it were understood, and
// DELETE ?force=1 removed as if force meant something. The parameters a
// call documents still work, and a caller without a token gets 401 first.
func TestUnknownQueryParameters(t *testing.T) {
	t.Parallel()
	var changes atomic.Int32
	l := newLiveConfig(t, countingSandboxes{changes: &changes}, testkit.ConfigFile(nil))
	for _, c := range []struct{ method, path, names string }{
		{"GET", "/admin/sandboxes/a/logs?folow=1", `"folow" (this call takes tail, follow)`},
		{"GET", "/admin/sandboxes/a/requests?count=5", `"count" (this call takes n)`},
		{"DELETE", "/admin/sandboxes/a?force=1", `"force" (this call takes no query parameters)`},
		{"POST", "/admin/sandboxes/a/stop?now", `"now"`},
		{"GET", "/admin/config?redacted=0", `"redacted"`},
		{"GET", "/admin/sandboxes/a/requests?n=1&n%zz", "does not parse"},
	} {
		resp, body := adminDo(t, l.admin, c.method, c.path, testkit.AdminToken, nil)
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":"bad_param"`) || !strings.Contains(string(body), strings.ReplaceAll(c.names, `"`, `\"`)) {
			t.Errorf("%s %s: got %d %s, want 400 bad_param naming %s", c.method, c.path, resp.StatusCode, body, c.names)
		}
	}
	if n := changes.Load(); n != 0 {
		t.Errorf("%d calls with an unknown parameter changed a sandbox", n)
	}
	if resp, body := adminDo(t, l.admin, "GET", "/admin/sandboxes/a/logs?tail=1&follow=0", testkit.AdminToken, nil); resp.StatusCode != 200 ||
		!strings.Contains(string(body), `"lines":["line"]`) {
		t.Errorf("logs?tail=1&follow=0: got %d %s, want the lines", resp.StatusCode, body)
	}
	if resp, body := adminDo(t, l.admin, "GET", "/admin/sandboxes/a/logs?follow=yes", testkit.AdminToken, nil); resp.StatusCode != 400 {
		t.Errorf("logs?follow=yes: got %d %s, want 400 (not the last lines as if follow were off)", resp.StatusCode, body)
	}
	if resp, _ := adminDo(t, l.admin, "GET", "/admin/sandboxes/a/requests?n=2", testkit.AdminToken, nil); resp.StatusCode != 200 {
		t.Errorf("requests?n=2: got %d, want 200", resp.StatusCode)
	}
	if resp, _ := adminDo(t, l.admin, "POST", "/admin/sandboxes/a/stop", testkit.AdminToken, nil); resp.StatusCode != 200 || changes.Load() != 1 {
		t.Errorf("stop without parameters: got %d and %d changes, want 200 and 1", resp.StatusCode, changes.Load())
	}
	if resp, _ := adminDo(t, l.admin, "DELETE", "/admin/sandboxes/a?force=1", "", nil); resp.StatusCode != 401 {
		t.Errorf("DELETE ?force=1 without a token: got %d, want 401", resp.StatusCode)
	}
}
