package admin_test

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// What a platform developer's walk of the sandbox API found inconsistent
// (docs/api.md): each call answers as the page says, on a real engine.

// GET /admin/sandboxes/{id} is the first call a backend tries (it was 405
// method_not_allowed): it answers exactly the object the list has for
// that sandbox, 404 not_found for none, and takes no query parameters.
// Its requests are a 404 for none too, and none yet for one without traffic.
func TestAdminGetSandbox(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	id, never := dockertest.UniqueID("get"), dockertest.UniqueID("get")
	removeAtEnd(t, e.mgr, id)
	if resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+id, testkit.AdminToken, []byte(`{"metadata":{"user":"u42"}}`)); resp.StatusCode != 200 {
		t.Fatalf("PUT: got %d %s", resp.StatusCode, body)
	}
	if resp, body := adminDo(t, srv, "PATCH", "/admin/sandboxes/"+id, testkit.AdminToken, []byte(`{"keep_up":"1h"}`)); resp.StatusCode != 200 {
		t.Fatalf("PATCH: got %d %s", resp.StatusCode, body)
	}
	resp, body := adminDo(t, srv, "GET", "/admin/sandboxes/"+id, testkit.AdminToken, nil)
	var one map[string]any
	if err := json.Unmarshal(body, &one); resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET /admin/sandboxes/%s: got %d %s, want 200 and the sandbox", id, resp.StatusCode, body)
	}
	_, body = adminDo(t, srv, "GET", "/admin/sandboxes?metadata.user=u42", testkit.AdminToken, nil)
	var list []map[string]any
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("list: %s: %v", body, err)
	}
	var listed map[string]any
	for _, s := range list {
		if s["id"] == id {
			listed = s
		}
	}
	if listed == nil {
		t.Fatalf("list %s lacks %s", body, id)
	}
	// Uptime is counted at each answer: a second apart at most.
	u1, _ := one["uptime_seconds"].(float64)
	u2, _ := listed["uptime_seconds"].(float64)
	if math.Abs(u1-u2) > 1 {
		t.Errorf("uptime_seconds: GET %v, list %v", u1, u2)
	}
	// So are the awake reasons ("last request 0s ago").
	for _, m := range []map[string]any{one, listed} {
		delete(m, "uptime_seconds")
		if aw, ok := m["awake"].(map[string]any); ok {
			delete(aw, "reasons")
		}
	}
	a, _ := json.Marshal(one)
	b, _ := json.Marshal(listed)
	if string(a) != string(b) {
		t.Errorf("GET /admin/sandboxes/%s:\n%s\nwant the list's object:\n%s", id, a, b)
	}
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{never, 404, "not_found"},
		// .../requests of an id that never existed answered 200 [].
		{never + "/requests", 404, "not_found"},
		{id + "/requests", 200, ""},
		{id + "?full=1", 400, "bad_param"},
		{"Not-An-Id", 400, "bad_sandbox_id"},
	} {
		resp, body := adminDo(t, srv, "GET", "/admin/sandboxes/"+c.path, testkit.AdminToken, nil)
		if resp.StatusCode != c.status || c.code != "" && !strings.Contains(string(body), `"code":"`+c.code+`"`) {
			t.Errorf("GET /admin/sandboxes/%s: got %d %s, want %d %s", c.path, resp.StatusCode, body, c.status, c.code)
		}
	}
}

// A keep_up_until in the past was accepted and echoed back, reading as a
// keep-up that holds: it is a 400 that changes nothing. A keep-up set on
// a stopped sandbox is kept by the runtime and holds once it runs again
// (the reaper's plan, which the list's awake shows, puts the stop off):
// the answer says so rather than leaving it to look ignored.
func TestAdminKeepUp(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	id := dockertest.UniqueID("keep")
	removeAtEnd(t, e.mgr, id)
	do := func(method, path, body string, status int, want string) []byte {
		t.Helper()
		resp, b := adminDo(t, srv, method, "/admin/sandboxes/"+id+path, testkit.AdminToken, []byte(body))
		if resp.StatusCode != status || !strings.Contains(string(b), want) {
			t.Fatalf("%s %s %s: got %d %s, want %d and %q", method, path, body, resp.StatusCode, b, status, want)
		}
		return b
	}
	do("PUT", "", "", 200, "")
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	do("PATCH", "", `{"keep_up_until":"`+past+`"}`, 400, "is in the past")
	if s, err := e.mgr.Records.Load(t.Context(), id); err != nil || !s.KeepUpUntil.IsZero() {
		t.Errorf("settings after a refused past keep_up_until: %+v (%v), want none", s, err)
	}
	if b := do("PATCH", "", `{"keep_up":"1h"}`, 200, `"keep_up_until"`); strings.Contains(string(b), `"note"`) {
		t.Errorf("keep-up of a running sandbox: got %s, want no note", b)
	}

	do("POST", "/stop", "", 200, "")
	var got adminapi.Settings
	json.Unmarshal(do("PATCH", "", `{"keep_up":"2h"}`, 200, `"keep_up_until"`), &got)
	if !strings.Contains(got.Note, "is exited") || !strings.Contains(got.Note, "runs again") {
		t.Errorf("keep-up of a stopped sandbox: note %q, want it to say it holds from when it runs again", got.Note)
	}
	if s, err := e.mgr.Records.Load(t.Context(), id); err != nil || got.KeepUpUntil == nil || !s.KeepUpUntil.Equal(*got.KeepUpUntil) {
		t.Errorf("the runtime's record: %+v (%v), want keep_up_until %v", s, err, got.KeepUpUntil)
	}
	do("PUT", "", "", 200, "")
	var one adminapi.Sandbox
	json.Unmarshal(do("GET", "", "", 200, ""), &one)
	if one.Awake == nil || got.KeepUpUntil == nil || !one.Awake.StopsAt.Equal(*got.KeepUpUntil) {
		t.Errorf("woken again: awake %+v, want the reaper to stop it at the keep-up's end %v", one.Awake, got.KeepUpUntil)
	}
}

// announce answered 200 under every TLS mode, where only ACME on-demand
// orders certificates at a handshake: elsewhere it is a 409 saying why,
// and nothing is announced.
func TestAdminAnnounceOnlyOnDemand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tls    config.TLS
		status int
		want   string
	}{
		{config.TLS{Mode: config.TLSOff}, 409, "tls.mode off"},
		{config.TLS{}, 409, "tls.mode off"},
		{config.TLS{Mode: config.TLSFiles}, 409, "tls.mode files"},
		{config.TLS{Mode: config.TLSSelfSigned}, 409, "tls.mode self-signed"},
		{config.TLS{Mode: config.TLSACME, ACME: config.ACME{Strategy: config.StrategyWildcard}}, 409, "wildcard strategy"},
		{config.TLS{Mode: config.TLSACME, ACME: config.ACME{Strategy: config.StrategyOnDemand}}, 200, `"announced":"abc123"`},
	} {
		cfg := &config.Config{AdminToken: testkit.AdminToken, TLS: c.tls}
		var announced []string
		srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return cfg },
			Sandboxes: noSandboxes{}, Log: testkit.Logger(t),
			Announce: func(id string) bool { announced = append(announced, id); return true }}))
		resp, body := adminDo(t, srv, "POST", "/admin/sandboxes/abc123/announce", testkit.AdminToken, nil)
		srv.Close()
		wantCode := c.status == 200 || strings.Contains(string(body), `"code":"no_on_demand_tls"`)
		if resp.StatusCode != c.status || !wantCode || !strings.Contains(string(body), c.want) {
			t.Errorf("announce under %+v: got %d %s, want %d and %q", c.tls, resp.StatusCode, body, c.status, c.want)
		}
		if (len(announced) == 1) != (c.status == 200) {
			t.Errorf("announce under %+v: announced %v", c.tls, announced)
		}
	}
}
