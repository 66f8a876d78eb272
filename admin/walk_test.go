package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// What a backend meets on the sandbox API of a real engine (#23, the
// platform developer's walk): each answer tells the caller what to do.

// removeAtEnd removes sandboxes ids through mgr when t ends, passed or not.
func removeAtEnd(t *testing.T, mgr *mgrtest.Manager, ids ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range ids {
			mgr.Remove(ctx, id)
		}
	})
}

// At capacity, PUT answers what a preview answers: 503 busy with
// Retry-After, not "unavailable" (the runtime does not answer) without
// one, which a backend cannot tell from an engine that is down.
func TestAdminPutAtCapacity(t *testing.T) {
	e := newDockerEnv(t, func(c *sandboxmgr.Config) { c.MaxRunning = 1 })
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	first, second := dockertest.UniqueID("cap"), dockertest.UniqueID("cap")
	removeAtEnd(t, e.mgr, first, second)

	if resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+first, testkit.AdminToken, nil); resp.StatusCode != 200 {
		t.Fatalf("PUT %s: got %d %s, want 200", first, resp.StatusCode, body)
	}
	resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+second, testkit.AdminToken, nil)
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"code":"busy"`) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("PUT over max_running: got %d Retry-After %q %s, want 503 busy with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if n := len(dockertest.Containers(t, e.cli, sandboxLabel(second))); n != 0 {
		t.Errorf("a PUT refused at capacity made %d containers", n)
	}
}

// Concurrent PUTs for one id share one create: only one body's template,
// env and metadata can apply. Each answer says whether it was its own
// ("created"), so the others learn theirs was not applied instead of a
// bare 200; a PUT on an existing sandbox answers created false.
func TestAdminConcurrentPutsSayWhichCreated(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	id := dockertest.UniqueID("race")
	removeAtEnd(t, e.mgr, id)

	type answer struct {
		Created *bool `json:"created"`
		user    string
		status  int
		body    string
	}
	answers := make(chan answer, 4)
	for i := range cap(answers) {
		go func() {
			a := answer{user: fmt.Sprintf("u%d", i)}
			req, _ := http.NewRequest("PUT", srv.URL+"/admin/sandboxes/"+id, strings.NewReader(`{"metadata":{"user":"`+a.user+`"}}`))
			req.Header.Set("Authorization", "Bearer "+testkit.AdminToken)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				a.status, a.body = resp.StatusCode, string(b)
				json.Unmarshal(b, &a)
			}
			answers <- a
		}()
	}
	var mine []string
	for range cap(answers) {
		a := <-answers
		switch {
		case a.status != 200:
			t.Errorf("PUT as %s: got %d %s, want 200", a.user, a.status, a.body)
		case a.Created == nil:
			t.Errorf("PUT as %s: got %s without created: the caller cannot tell whether its metadata applied", a.user, a.body)
		case *a.Created:
			mine = append(mine, a.user)
		}
	}
	infos, err := e.mgr.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(infos, func(in sandboxmgr.Info) bool { return in.ID == id })
	if len(mine) != 1 || i < 0 || infos[i].Metadata["user"] != mine[0] {
		t.Fatalf("created true for %v, sandbox listed as %v: want exactly one, whose metadata it has", mine, infos)
	}
	_, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+id, testkit.AdminToken, []byte(`{"metadata":{"user":"late"}}`))
	if !strings.Contains(string(body), `"created":false`) {
		t.Errorf("PUT on the existing sandbox: got %s, want created false", body)
	}
}

// A call the API does not have is answered as the API's errors are, JSON
// {error, code}: a client reading every answer as JSON (docs/api.md's
// examples) says what was wrong instead of failing on net/http's text.
func TestAdminUnknownCallsAnswerJSON(t *testing.T) {
	cfg := &config.Config{AdminToken: testkit.AdminToken}
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return cfg },
		Sandboxes: noSandboxes{}, Log: testkit.Logger(t)}))
	defer srv.Close()
	for _, c := range []struct {
		method, path, code, allow string
		status                    int
	}{
		{"POST", "/admin/sandboxes/abc123", "method_not_allowed", "GET, PUT, PATCH, DELETE", 405},
		{"POST", "/admin/sandboxes", "method_not_allowed", "GET", 405},
		{"PUT", "/admin/sandboxes/abc123/stop", "method_not_allowed", "POST", 405},
		{"GET", "/admin/sandboxes/abc123/link", "no_such_call", "", 404},
		{"GET", "/admin/nope", "no_such_call", "", 404},
	} {
		resp, body := adminDo(t, srv, c.method, c.path, testkit.AdminToken, nil)
		var e struct{ Error, Code string }
		err := json.Unmarshal(body, &e)
		if resp.StatusCode != c.status || err != nil || e.Code != c.code || e.Error == "" || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: got %d Allow %q %q, want %d Allow %q and JSON code %s",
				c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), body, c.status, c.allow, c.code)
		}
	}
}

// A DELETE while a PUT creates the sandbox removes it, whichever step
// the create is at: before, it answered 404 while the container was being
// created (not yet inspectable) and the PUT then brought it up, or 200
// between create and start, where the wake created it again. The PUT
// says it was removed and what to do, not a bare "no such sandbox".
func TestAdminPutRemovedWhileStarting(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	e.cfg.Templates["app"].Env = map[string]string{"LISTEN_DELAY": "3s"}
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	id := dockertest.UniqueID("putrm")
	removeAtEnd(t, e.mgr, id)

	put := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("PUT", srv.URL+"/admin/sandboxes/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+testkit.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			put <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		put <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	testkit.WaitFor(t, "the PUT's container", func() bool { return len(dockertest.Containers(t, e.cli, sandboxLabel(id))) > 0 })
	if resp, body := adminDo(t, srv, "DELETE", "/admin/sandboxes/"+id, testkit.AdminToken, nil); resp.StatusCode != 200 {
		t.Errorf("DELETE while the PUT creates it: got %d %s, want 200", resp.StatusCode, body)
	}
	if got := <-put; !strings.HasPrefix(got, "404 ") || !strings.Contains(got, "removed while") {
		t.Errorf("PUT whose sandbox a DELETE removed: got %s, want 404 saying it was removed while it started", got)
	}
	if cs := dockertest.Containers(t, e.cli, sandboxLabel(id)); len(cs) != 0 {
		t.Errorf("after DELETE answered: %d containers of %s (%s), want none", len(cs), id, cs[0].State)
	}
}

// A body is one JSON object: an empty one, or a second object after it
// (a client that concatenated two edits), is a 400 that changes nothing,
// not half applied with the rest dropped unread. ?tail=0 is no lines.
func TestAdminBodyIsOneObject(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	id, never := dockertest.UniqueID("body"), dockertest.UniqueID("body")
	removeAtEnd(t, e.mgr, id, never)
	if resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+id, testkit.AdminToken, nil); resp.StatusCode != 200 {
		t.Fatalf("PUT: got %d %s", resp.StatusCode, body)
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"PATCH", id, `{"public":true}{"keep_up":"2h"}`, "nothing after it"},
		{"PATCH", id, `{"public":true} x`, "nothing after it"},
		{"PATCH", id, ``, "empty; want a JSON object"},
		{"PUT", never, `{"template":"app"} {"template":"other"}`, "nothing after it"},
		{"POST", id + "/links", `{"ttl":"10m"}{"ttl":"1h"}`, "nothing after it"},
	} {
		resp, body := adminDo(t, srv, c.method, "/admin/sandboxes/"+c.path, testkit.AdminToken, []byte(c.body))
		if resp.StatusCode != 400 || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s %s: got %d %s, want 400 %q", c.method, c.path, c.body, resp.StatusCode, body, c.want)
		}
	}
	// ?tail=0 is no lines, as with follow (it was one).
	testkit.WaitFor(t, "the app's first line", func() bool {
		_, body := adminDo(t, srv, "GET", "/admin/sandboxes/"+id+"/logs?tail=1", testkit.AdminToken, nil)
		return strings.Contains(string(body), "listening")
	})
	if resp, body := adminDo(t, srv, "GET", "/admin/sandboxes/"+id+"/logs?tail=0", testkit.AdminToken, nil); resp.StatusCode != 200 || !strings.Contains(string(body), `"lines":[]`) {
		t.Errorf("logs?tail=0: got %d %s, want 200 and no lines", resp.StatusCode, body)
	}
	s, err := e.mgr.Records.Load(t.Context(), id)
	if err != nil || s.Public != nil || len(s.Links) != 0 {
		t.Errorf("settings after refused bodies: %+v (%v), want none changed", s, err)
	}
	if n := len(dockertest.Containers(t, e.cli, sandboxLabel(never))); n != 0 {
		t.Errorf("a refused PUT made %d containers", n)
	}
}

// A body's keys are exact and given once, at any depth: encoding/json
// would take {"Public": true} as public (it matches names without case)
// and the last of two "public" keys. A client sending either gets a 400
// naming the key, and nothing changes; the exact keys still work.
func TestAdminBodyKeysStrict(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	id, never := dockertest.UniqueID("keys"), dockertest.UniqueID("keys")
	removeAtEnd(t, e.mgr, id, never)
	if resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+id, testkit.AdminToken, nil); resp.StatusCode != 200 {
		t.Fatalf("PUT: got %d %s", resp.StatusCode, body)
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"PATCH", id, `{"Public":true}`, `unknown key \"Public\" (keys are exact: \"public\")`},
		{"PATCH", id, `{"PUBLIC":true}`, `unknown key \"PUBLIC\"`},
		{"PATCH", id, `{"public":false,"public":true}`, `key \"public\" is given twice`},
		{"PATCH", id, `{"keep_up":"1h","public":true,"keep_up":"2h"}`, `key \"keep_up\" is given twice`},
		{"PATCH", id, `{"publik":true}`, `unknown key \"publik\"`},
		{"POST", id + "/links", `{"TTL":"10m"}`, `unknown key \"TTL\"`},
		{"POST", id + "/links", `{"ttl":"10m","ttl":"1h"}`, `key \"ttl\" is given twice`},
		{"PUT", never, `{"Template":"app"}`, `unknown key \"Template\"`},
		{"PUT", never, `{"template":"app","env":{"A":"1","A":"2"}}`, `key \"env.A\" is given twice`},
	} {
		resp, body := adminDo(t, srv, c.method, "/admin/sandboxes/"+c.path, testkit.AdminToken, []byte(c.body))
		if resp.StatusCode != 400 || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s %s: got %d %s, want 400 %s", c.method, c.path, c.body, resp.StatusCode, body, c.want)
		}
	}
	s, err := e.mgr.Records.Load(t.Context(), id)
	if err != nil || s.Public != nil || !s.KeepUpUntil.IsZero() || len(s.Links) != 0 {
		t.Errorf("settings after refused bodies: %+v (%v), want none changed", s, err)
	}
	if n := len(dockertest.Containers(t, e.cli, sandboxLabel(never))); n != 0 {
		t.Errorf("a refused PUT made %d containers", n)
	}
	if resp, body := adminDo(t, srv, "PATCH", "/admin/sandboxes/"+id, testkit.AdminToken, []byte(`{"public":true,"keep_up":"1h"}`)); resp.StatusCode != 200 {
		t.Errorf("PATCH with exact keys: got %d %s, want 200", resp.StatusCode, body)
	}
}

// A share link for a port of a sandbox whose id is too long for a port
// address (<port>-sandbox-<id> over one 63-character DNS label) is refused
// at mint, 400 id_too_long_for_port, not minted with a URL the gateway can
// only answer 400; the template's own port (sandbox-<id>) still gets one.
func TestAdminLinkPortHostTooLong(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	e.cfg.Templates["app"].Ports = []int{3000, 3001}
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	short := dockertest.UniqueID("lp")
	long := short + "-" + strings.Repeat("x", config.PortIDMax(3001)-len(short))
	if len(long) != 51 || !config.ValidID(long) {
		t.Fatalf("test id %q (%d characters): want a valid id of 51", long, len(long))
	}
	removeAtEnd(t, e.mgr, long)
	if resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+long, testkit.AdminToken, nil); resp.StatusCode != 200 {
		t.Fatalf("PUT: got %d %s", resp.StatusCode, body)
	}
	resp, body := adminDo(t, srv, "POST", "/admin/sandboxes/"+long+"/links", testkit.AdminToken, []byte(`{"port":3001}`))
	if resp.StatusCode != 400 || !strings.Contains(string(body), "id_too_long_for_port") || !strings.Contains(string(body), "at most 50 characters") {
		t.Errorf("link for port 3001 of a 51-character id: got %d %s, want 400 id_too_long_for_port saying at most 50", resp.StatusCode, body)
	}
	if s, err := e.mgr.Records.Load(t.Context(), long); err != nil || len(s.Links) != 0 {
		t.Errorf("links after the refusal: %d (%v), want none kept", len(s.Links), err)
	}
	if resp, body := adminDo(t, srv, "POST", "/admin/sandboxes/"+long+"/links", testkit.AdminToken, []byte(`{"port":3000}`)); resp.StatusCode != 201 {
		t.Errorf("link for the template's port: got %d %s, want 201", resp.StatusCode, body)
	}
}

// A container that holds a sandbox's name but is not this gateway's is
// answered 409 foreign_container by every call, as docs/api.md says: stop
// and DELETE answered 503 "unavailable" (the runtime does not answer;
// retry), which a backend retries forever. It is never touched.
func TestAdminForeignContainerIsConflict(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	id := dockertest.UniqueID("foreign")
	c, err := e.cli.ContainerCreate(t.Context(), &container.Config{Image: dockertest.TestAppImage(t), Labels: dockertest.Labels()},
		nil, nil, nil, mgrtest.Name(e.labels, id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	for _, call := range []struct{ method, path, body string }{
		{"PUT", "", ""}, {"POST", "/stop", ""}, {"DELETE", "", ""},
		{"GET", "", ""}, {"GET", "/requests", ""}, {"GET", "/logs", ""},
		{"POST", "/pause", ""}, {"POST", "/resume", ""},
		// Settings and links answered 404 (this gateway knows no such
		// sandbox) where the others say whose the name is.
		{"PATCH", "", `{"public":true}`}, {"POST", "/links", `{"ttl":"10m"}`},
		{"GET", "/links", ""}, {"DELETE", "/links/l1", ""},
	} {
		resp, body := adminDo(t, srv, call.method, "/admin/sandboxes/"+id+call.path, testkit.AdminToken, []byte(call.body))
		if resp.StatusCode != 409 || !strings.Contains(string(body), `"code":"foreign_container"`) {
			t.Errorf("%s %s on another's container: got %d %s, want 409 foreign_container", call.method, call.path, resp.StatusCode, body)
		}
	}
	if _, err := e.cli.ContainerInspect(t.Context(), c.ID); err != nil {
		t.Errorf("the foreign container: %v, want it left alone", err)
	}
}

// Concurrent DELETEs of one sandbox (a retry, two workers cleaning up):
// one removes it; the others answer 200 or 404, never 503 "unavailable"
// for Docker's "removal already in progress", which says to retry.
func TestAdminConcurrentDeletes(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	for range 3 {
		id := dockertest.UniqueID("deldel")
		removeAtEnd(t, e.mgr, id)
		if resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+id, testkit.AdminToken, nil); resp.StatusCode != 200 {
			t.Fatalf("PUT: got %d %s", resp.StatusCode, body)
		}
		answers := make(chan string, 4)
		for range cap(answers) {
			go func() {
				req, _ := http.NewRequest("DELETE", srv.URL+"/admin/sandboxes/"+id, nil)
				req.Header.Set("Authorization", "Bearer "+testkit.AdminToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					answers <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				answers <- fmt.Sprintf("%d %s", resp.StatusCode, b)
			}()
		}
		removed := 0
		for range cap(answers) {
			a := <-answers
			switch {
			case strings.HasPrefix(a, "200 "):
				removed++
			case !strings.HasPrefix(a, "404 "):
				t.Errorf("concurrent DELETE: got %s, want 200 or 404", a)
			}
		}
		if removed == 0 {
			t.Errorf("concurrent DELETEs: none answered 200")
		}
		if n := len(dockertest.Containers(t, e.cli, sandboxLabel(id))); n != 0 {
			t.Errorf("after DELETEs: %d containers", n)
		}
	}
}

// The refusals of pause and resume say what to do instead: pause of a
// stopped sandbox (resume starts it), resume of none (PUT creates it).
func TestAdminPauseResumeSayWhatToDo(t *testing.T) {
	e := newDockerEnv(t)
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer srv.Close()
	id := dockertest.UniqueID("hint")
	removeAtEnd(t, e.mgr, id)
	for _, c := range []struct {
		method, path string
		status       int
		want         string
	}{
		{"POST", "/resume", 404, "PUT /admin/sandboxes/" + id},
		{"PUT", "", 200, ""},
		{"POST", "/stop", 200, ""},
		{"POST", "/pause", 409, "resume starts it"},
	} {
		resp, body := adminDo(t, srv, c.method, "/admin/sandboxes/"+id+c.path, testkit.AdminToken, nil)
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s: got %d %s, want %d and %q", c.method, c.path, resp.StatusCode, body, c.status, c.want)
		}
	}
}
