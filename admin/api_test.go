package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

const testAPIToken = "backend-api-token-0123456789"

// The backend API (#16) against real Docker, with a scoped API token:
// pre-create with an allowed env value, refuse another, read and follow
// the logs, learn why a start failed; the token opens nothing else.
func TestAdminAPIWarmAndLogs(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	e.cfg.APITokens = []config.APIToken{{Token: testAPIToken, Scopes: []string{config.APIScopeSandboxes}}}
	e.cfg.Templates["app"].AllowEnv = []string{"GREETING"}
	e.cfg.Templates["crash"] = &config.Template{Name: "crash", Image: e.cfg.Templates["app"].Image,
		Env: map[string]string{"CRASH": "Error: Cannot find module './missing'"}}
	e.cfg.ApplyDefaults()
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()

	id := dockertest.UniqueID("warm")
	resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+id, testAPIToken, []byte(`{"template":"app","env":{"NOT_ALLOWED":"x"}}`))
	if resp.StatusCode != 400 || !strings.Contains(string(body), "env_not_allowed") {
		t.Fatalf("PUT with a disallowed env: got %d %s, want 400 env_not_allowed", resp.StatusCode, body)
	}
	if n := len(dockertest.Containers(t, e.cli, sandboxLabel(id))); n != 0 {
		t.Fatalf("a refused PUT made %d containers", n)
	}
	resp, body = adminDo(t, srv, "PUT", "/admin/sandboxes/"+id, testAPIToken, []byte(`{"template":"app","env":{"GREETING":"hi"}}`))
	if resp.StatusCode != 200 {
		t.Fatalf("PUT: got %d %s, want 200", resp.StatusCode, body)
	}
	c := dockertest.OnlyContainer(t, e.cli, sandboxLabel(id))
	if c.State != "running" {
		t.Fatalf("after PUT: Docker state %q, want running", c.State)
	}
	ins, err := e.cli.ContainerInspect(context.Background(), c.ID)
	if err != nil || !slices.Contains(ins.Config.Env, "GREETING=hi") {
		t.Errorf("container env %v (%v), want GREETING=hi", ins.Config.Env, err)
	}

	// Docker copies a container's output to its log asynchronously: the
	// sandbox can be ready before its line is there, so poll for it.
	testkit.WaitFor(t, "the listening line from the logs endpoint", func() bool {
		resp, body := adminDo(t, srv, "GET", "/admin/sandboxes/"+id+"/logs?tail=5", testAPIToken, nil)
		var logs struct{ Lines []string }
		if err := json.Unmarshal(body, &logs); err != nil || resp.StatusCode != 200 {
			t.Fatalf("logs: got %d %s, want 200 with lines", resp.StatusCode, body)
		}
		return slices.ContainsFunc(logs.Lines, func(l string) bool { return strings.Contains(l, "listening on :3000") })
	})

	// follow=1: SSE; the first event is the last line so far.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/admin/sandboxes/"+id+"/logs?follow=1&tail=1", nil)
	req.Header.Set("Authorization", "Bearer "+testAPIToken)
	fresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := fresp.Header.Get("Content-Type"); fresp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("follow: got %d %s, want 200 text/event-stream", fresp.StatusCode, ct)
	}
	sc := bufio.NewScanner(fresp.Body)
	var first string
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &first); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			break
		}
	}
	cancel()
	fresp.Body.Close()
	if !strings.Contains(first, "listening on :3000") {
		t.Errorf("follow: got first line %q, want the listening line", first)
	}

	// A template whose app crashes: the answer says why, with its output.
	crashID := dockertest.UniqueID("warmcrash")
	resp, body = adminDo(t, srv, "PUT", "/admin/sandboxes/"+crashID, testAPIToken, []byte(`{"template":"crash"}`))
	var fail struct {
		Code, Reason string
		Logs         []string
	}
	json.Unmarshal(body, &fail)
	if resp.StatusCode != 502 || fail.Code != "sandbox_exited" ||
		!slices.ContainsFunc(fail.Logs, func(l string) bool { return strings.Contains(l, "Cannot find module") }) {
		t.Errorf("PUT crash: got %d %s, want 502 sandbox_exited (as a preview says) with the app's error", resp.StatusCode, body)
	}
	for _, c := range dockertest.Containers(t, e.cli, sandboxLabel(crashID)) {
		if c.State == "running" {
			t.Errorf("crashed sandbox left running")
		}
	}

	// The API token opens the sandbox calls only.
	for _, c := range []struct{ method, path string }{{"GET", "/admin/config"}, {"POST", "/admin/config/validate"}, {"PUT", "/admin/config"}} {
		if resp, _ := adminDo(t, srv, c.method, c.path, testAPIToken, nil); resp.StatusCode != 401 {
			t.Errorf("%s %s with the API token: got %d, want 401", c.method, c.path, resp.StatusCode)
		}
	}
	if resp, _ := adminDo(t, srv, "GET", "/admin/sandboxes/"+id+"/logs", "wrong-token-0123456789", nil); resp.StatusCode != 401 {
		t.Errorf("logs with a wrong token: got %d, want 401", resp.StatusCode)
	}
	if resp, _ := adminDo(t, srv, "GET", "/admin/sandboxes/no-such-sandbox/logs", testAPIToken, nil); resp.StatusCode != 404 {
		t.Errorf("logs of no sandbox: got %d, want 404", resp.StatusCode)
	}
	if resp, body := adminDo(t, srv, "DELETE", "/admin/sandboxes/"+id, testAPIToken, nil); resp.StatusCode != 200 {
		t.Errorf("DELETE with the API token: got %d %s", resp.StatusCode, body)
	}
}

// /readyz names a template whose image the engine lacks, without taking
// the gateway out of rotation (#16): other templates still serve.
func TestReadyzNamesMissingImages(t *testing.T) {
	e := newDockerEnv(t)
	var live atomic.Pointer[config.Config]
	live.Store(e.cfg)
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: live.Load, Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs,
		Images: e.mgr.Runtime.Capabilities().Images, Log: testkit.Logger(t)}))
	defer srv.Close()
	var checks map[string]string
	read := func() int {
		resp, body := adminDo(t, srv, "GET", "/readyz", "", nil)
		checks = nil
		if err := json.Unmarshal(body, &checks); err != nil {
			t.Fatalf("/readyz: %s: %v", body, err)
		}
		return resp.StatusCode
	}
	if code := read(); code != 200 || checks["images"] != "ok" {
		t.Fatalf("/readyz with every image present: %d %v, want 200 and images ok", code, checks)
	}
	next := *e.cfg
	next.Templates = maps.Clone(e.cfg.Templates)
	next.Templates["broken"] = &config.Template{Name: "broken", Image: "previewgate-test-missing:nope"}
	live.Store(&next)
	if code := read(); code != 200 || !strings.Contains(checks["images"], "previewgate-test-missing:nope") {
		t.Fatalf("/readyz with a missing image: %d %v, want 200 and the image named", code, checks)
	}
}
