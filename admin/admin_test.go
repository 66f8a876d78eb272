package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/gateway"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/metrics"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// liveConfig is the admin API over a real file and a real config watcher
// that applies to a real gateway, as serve wires them.
type liveConfig struct {
	path    string
	store   *config.Store
	watcher *config.Watcher
	gw      *gateway.Gateway
	srv     *httptest.Server // the gateway
	admin   *httptest.Server
}

func newLiveConfig(t *testing.T, sb admin.Sandboxes, content string) *liveConfig {
	t.Helper()
	path, cfg := testkit.WriteConfig(t, content)
	l := &liveConfig{path: path, store: config.NewStore(cfg)}
	m := metrics.New()
	var err error
	l.gw, err = gateway.New(cfg, upstreamsOnly{}, gateway.Options{Metrics: m}, testkit.Logger(t))
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	t.Cleanup(l.gw.Close)
	l.srv = httptest.NewServer(l.gw)
	t.Cleanup(l.srv.Close)
	l.watcher, err = config.NewWatcher(config.WatcherConfig{Path: l.path, Store: l.store, Prepare: l.gw.Prepare,
		Debounce: 50 * time.Millisecond, OnResult: m.ReloadResult}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.watcher.Close() })
	l.admin = httptest.NewServer(newAdmin(t, admin.Options{Config: l.store.Load, Replace: l.watcher.Replace,
		Sandboxes: sb, Logs: logsOf(sb), Images: imagesOf(sb), Metrics: m.Handler(), Log: testkit.Logger(t)}))
	t.Cleanup(l.admin.Close)
	return l
}

// upstreamsOnly serves a gateway whose tests use upstream routes only: a
// call reaching the sandbox manager panics.
type upstreamsOnly struct{ gateway.Sandboxes }

// upstreamApp answers every request with 200.
func upstreamApp(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(s.Close)
	return s
}

func adminDo(t *testing.T, srv *httptest.Server, method, path, token string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// noSandboxes answers the admin API's sandbox calls without Docker.
type noSandboxes struct{ admin.Sandboxes }

func (noSandboxes) Ping(context.Context) error { return nil }

// Get finds no sandbox (fakes that list some answer their own).
func (noSandboxes) Get(context.Context, string) (sandboxmgr.Info, error) {
	return sandboxmgr.Info{}, runtime.ErrNotFound
}

// logsOf is the Logs a fake answers, if it does.
func logsOf(sb admin.Sandboxes) runtime.Logs {
	l, _ := sb.(runtime.Logs)
	return l
}

// imagesOf is the images a fake says the engine has, if it does.
func imagesOf(sb admin.Sandboxes) admin.ImageChecker {
	ic, _ := sb.(admin.ImageChecker)
	return ic
}

func TestAdminNeedsToken(t *testing.T) {
	t.Parallel()
	l := newLiveConfig(t, noSandboxes{}, testkit.ConfigFile(nil))
	for _, c := range []struct{ method, path string }{
		{"GET", "/admin/config"}, {"PUT", "/admin/config"}, {"POST", "/admin/config/validate"},
		{"GET", "/admin/sandboxes"}, {"POST", "/admin/sandboxes/abc/stop"}, {"DELETE", "/admin/sandboxes/abc"},
		{"GET", "/metrics"},
	} {
		for _, tok := range []string{"", "wrong-token"} {
			if resp, _ := adminDo(t, l.admin, c.method, c.path, tok, nil); resp.StatusCode != 401 {
				t.Errorf("%s %s with token %q: got %d, want 401", c.method, c.path, tok, resp.StatusCode)
			}
		}
	}
	if resp, body := adminDo(t, l.admin, "GET", "/metrics", testkit.AdminToken, nil); resp.StatusCode != 200 ||
		!strings.Contains(string(body), `previewgate_config_reloads_total{result="failure"} 0`) {
		t.Errorf("GET /metrics with the token: got %d, want 200 with the reload series:\n%.300s", resp.StatusCode, body)
	}
	if resp, _ := adminDo(t, l.admin, "GET", "/healthz", "", nil); resp.StatusCode != 200 {
		t.Errorf("healthz: got %d, want 200", resp.StatusCode)
	}
	// A malformed id is answered with the rule, not only that it broke one.
	if resp, body := adminDo(t, l.admin, "PUT", "/admin/sandboxes/ABC-123", testkit.AdminToken, nil); resp.StatusCode != 400 ||
		!strings.Contains(string(body), `"bad_sandbox_id"`) || !strings.Contains(string(body), "lowercase letters, digits, inner hyphens, 1-55 characters") {
		t.Errorf("PUT /admin/sandboxes/ABC-123: got %d %s, want 400 bad_sandbox_id naming the rule", resp.StatusCode, body)
	}
	resp, body := adminDo(t, l.admin, "GET", "/admin/config", testkit.AdminToken, nil)
	if resp.StatusCode != 200 || strings.Contains(string(body), testkit.Secret) || strings.Contains(string(body), testkit.AdminToken) {
		t.Errorf("GET /admin/config: got %d, secrets must be redacted:\n%s", resp.StatusCode, body)
	}
}

// TestAdminWithoutToken: a config without admin_token closes the admin
// API (docs); the 401 says that no token can open it, not only that one
// is required, so an operator does not go looking for the right one.
func TestAdminWithoutToken(t *testing.T) {
	t.Parallel()
	content := strings.Replace(testkit.ConfigFile(nil), "admin_token: "+testkit.AdminToken+"\n", "", 1)
	l := newLiveConfig(t, noSandboxes{}, content)
	for _, path := range []string{"/admin/config", "/admin/sandboxes"} {
		resp, body := adminDo(t, l.admin, "GET", path, "anything-at-all-0123", nil)
		if resp.StatusCode != 401 || !strings.Contains(string(body), "no admin_token") {
			t.Errorf("GET %s: got %d %s, want 401 saying there is no admin_token", path, resp.StatusCode, body)
		}
	}
}

func TestAdminPutConfig(t *testing.T) {
	t.Parallel()
	app := upstreamApp(t)
	l := newLiveConfig(t, noSandboxes{}, testkit.ConfigFile(nil))
	before, _ := os.ReadFile(l.path)
	tok := testkit.Mint(t, l.store.Load(), "*", time.Minute)

	bad := []byte(testkit.ConfigFile(nil) + "limits:\n  per_ip: {rate: fast}\n")
	resp, body := adminDo(t, l.admin, "PUT", "/admin/config", testkit.AdminToken, bad)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "previewgate.yaml:12:18: ") {
		t.Fatalf("bad PUT: got %d %s, want 400 with LINE:COL", resp.StatusCode, body)
	}
	if after, _ := os.ReadFile(l.path); !bytes.Equal(after, before) {
		t.Fatal("bad PUT changed the file")
	}
	resp, body = adminDo(t, l.admin, "POST", "/admin/config/validate", testkit.AdminToken, bad)
	if resp.StatusCode != 400 {
		t.Fatalf("validate bad: got %d %s, want 400", resp.StatusCode, body)
	}

	good := []byte(testkit.ConfigFile(map[string]string{"docs.example.test": app.URL}))
	if resp, body := adminDo(t, l.admin, "POST", "/admin/config/validate", testkit.AdminToken, good); resp.StatusCode != 200 {
		t.Fatalf("validate good: got %d %s", resp.StatusCode, body)
	}
	if r := testkit.Request(t, l.srv, "GET", "docs.example.test", "/", tok); r.StatusCode != 404 {
		t.Fatalf("route before PUT: got %d, want 404", r.StatusCode)
	}
	resp, body = adminDo(t, l.admin, "PUT", "/admin/config", testkit.AdminToken, good)
	if resp.StatusCode != 200 {
		t.Fatalf("good PUT: got %d %s", resp.StatusCode, body)
	}
	if after, _ := os.ReadFile(l.path); !bytes.Equal(after, good) {
		t.Fatal("good PUT did not write the file")
	}
	if bak, _ := os.ReadFile(l.path + ".bak"); !bytes.Equal(bak, before) {
		t.Fatal("good PUT did not keep the previous file as .bak")
	}
	if r := testkit.Request(t, l.srv, "GET", "docs.example.test", "/", tok); r.StatusCode != 200 {
		t.Fatalf("route after PUT: got %d, want 200", r.StatusCode)
	}
}

// TestAdminSandboxesMatchDocker lists, stops and removes real sandboxes
// through the admin API and checks Docker agrees.
func TestAdminSandboxesMatchDocker(t *testing.T) {
	e := newDockerEnv(t)
	ids := []string{dockertest.UniqueID("adm-a"), dockertest.UniqueID("adm-b")}
	for _, id := range ids {
		if _, err := e.mgr.Ensure(t.Context(), id, e.cfg.Templates["app"]); err != nil {
			t.Fatalf("ensure %s: %v", id, err)
		}
	}
	e.cfg.AdminToken = testkit.AdminToken
	adminSrv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Settings: e.mgr.Records, Logs: e.mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	defer adminSrv.Close()

	resp, body := adminDo(t, adminSrv, "GET", "/admin/sandboxes", testkit.AdminToken, nil)
	var list []adminapi.Sandbox
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list: %d %s %v", resp.StatusCode, body, err)
	}
	dockerList := dockertest.Containers(t, e.cli, runtime.LabelManaged+"=true", dockertest.LabelCase+"="+t.Name())
	got := map[string]string{}
	for _, s := range list {
		got[s.ID] = s.State
	}
	for _, c := range dockerList {
		if got[c.Labels[runtime.LabelSandbox]] != c.State {
			t.Errorf("sandbox %s: admin says %q, Docker says %q", c.Labels[runtime.LabelSandbox], got[c.Labels[runtime.LabelSandbox]], c.State)
		}
	}
	for _, id := range ids {
		if got[id] != "running" {
			t.Errorf("sandbox %s: got state %q in the list, want running", id, got[id])
		}
	}

	if resp, body := adminDo(t, adminSrv, "POST", "/admin/sandboxes/"+ids[0]+"/stop", testkit.AdminToken, nil); resp.StatusCode != 200 {
		t.Fatalf("stop: %d %s", resp.StatusCode, body)
	}
	if st := dockertest.OnlyContainer(t, e.cli, sandboxLabel(ids[0])).State; st != "exited" {
		t.Fatalf("after stop: Docker state %q, want exited", st)
	}
	if resp, body := adminDo(t, adminSrv, "DELETE", "/admin/sandboxes/"+ids[1], testkit.AdminToken, nil); resp.StatusCode != 200 {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	if n := len(dockertest.Containers(t, e.cli, sandboxLabel(ids[1]))); n != 0 {
		t.Fatalf("after delete: %d containers, want 0", n)
	}
	if resp, _ := adminDo(t, adminSrv, "DELETE", "/admin/sandboxes/no-such-sandbox", testkit.AdminToken, nil); resp.StatusCode != 404 {
		t.Fatalf("delete unknown: got %d, want 404", resp.StatusCode)
	}
	if resp, _ := adminDo(t, adminSrv, "POST", "/admin/sandboxes/Bad_Id/stop", testkit.AdminToken, nil); resp.StatusCode != 400 {
		t.Fatalf("stop malformed: got %d, want 400", resp.StatusCode)
	}
}

// dockerEnv is a real sandbox manager on a network of its own, scoped to
// one test's containers.
type dockerEnv struct {
	cli *client.Client
	cfg *config.Config
	mgr *mgrtest.Manager
	// labels are the manager's scope.
	labels map[string]string
	// records is its records store, as a Docker gateway keeps them in its
	// data dir: a second manager sharing it stands in for a replica.
	records records.Store
}

// newDockerEnv's manager takes the config tune gives it (limits).
func newDockerEnv(t *testing.T, tune ...func(*sandboxmgr.Config)) *dockerEnv {
	t.Helper()
	cli := dockertest.Client(t)
	cfg := &config.Config{
		Domains: config.StringList{testkit.Domain},
		Auth: config.Auth{Audience: "previewgate", Issuers: []string{"test"},
			Keys: []config.Key{{KID: "k1", Alg: "HS256", Secret: testkit.Secret}}},
		Templates: map[string]*config.Template{"app": {Image: dockertest.TestAppImage(t),
			Ready: config.Ready{Path: "/", Timeout: config.Duration(20 * time.Second)}}},
		DefaultTemplate: "app",
	}
	cfg.ApplyDefaults()
	labels := dockertest.Labels()
	labels[dockertest.LabelCase] = t.Name()
	mc := sandboxmgr.Config{Network: dockertest.Network(t), Labels: labels,
		Templates: func(name string) *config.Template { return cfg.Templates[name] }}
	for _, f := range tune {
		f(&mc)
	}
	recs := dockertest.Records(t)
	mgr, err := mgrtest.New(mgrtest.Config{Config: mc, Runtime: mgrtest.Runtime{Records: recs}}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("manager start: %v", err)
	}
	return &dockerEnv{cli: cli, cfg: cfg, mgr: mgr, labels: labels, records: recs}
}

// sandboxLabel selects the containers of sandbox id (dockertest.Containers).
func sandboxLabel(id string) string { return runtime.LabelSandbox + "=" + id }
