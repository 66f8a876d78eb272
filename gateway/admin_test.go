package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr"
)

const (
	testAdminToken = "admin-token-for-tests-0123456789"
	testSecret     = "0123456789abcdef0123456789abcdef"
)

// fileConfig renders a config file whose routes send each host to an
// upstream (the backends of a reload test).
func fileConfig(routes map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `domain: %s
admin_token: %s
auth:
  audience: previewgate
  issuers: [test]
  keys: [{kid: k1, alg: HS256, secret: %q}]
default_template: app
templates:
  app: {image: testapp}
`, testDomain, testAdminToken, testSecret)
	if len(routes) > 0 {
		b.WriteString("routes:\n")
		for host, up := range routes {
			fmt.Fprintf(&b, "  - {host: %s, upstream: %q}\n", host, up)
		}
	}
	return b.String()
}

// liveConfig is a gateway fed from a real file by a real config watcher.
type liveConfig struct {
	path    string
	store   *config.Store
	watcher *config.Watcher
	gw      *Gateway
	srv     *httptest.Server
	admin   *httptest.Server
	results chan string
}

func newLiveConfig(t *testing.T, sb Sandboxes, admin AdminSandboxes, content string) *liveConfig {
	t.Helper()
	l := &liveConfig{path: filepath.Join(t.TempDir(), "previewgate.yaml"), results: make(chan string, 200)}
	if err := os.WriteFile(l.path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(l.path)
	if err != nil {
		t.Fatal(err)
	}
	l.store = config.NewStore(cfg)
	l.gw, l.srv = startGateway(t, cfg, sb)
	l.watcher, err = config.NewWatcher(config.WatcherConfig{Path: l.path, Store: l.store, Apply: l.gw.Apply,
		Debounce: 50 * time.Millisecond, OnResult: func(r string) {
			l.gw.ReloadResult(r)
			select {
			case l.results <- r:
			default:
			}
		}}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.watcher.Close() })
	l.admin = httptest.NewServer(NewAdmin(AdminOptions{Config: l.store.Load, Replace: l.watcher.Replace,
		Sandboxes: admin, Metrics: l.gw.MetricsHandler(), Log: testLogger(t)}))
	t.Cleanup(l.admin.Close)
	return l
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
type noSandboxes struct{ AdminSandboxes }

func (noSandboxes) Ping(context.Context) error { return nil }

func TestAdminNeedsToken(t *testing.T) {
	t.Parallel()
	l := newLiveConfig(t, &fakeSandboxes{}, noSandboxes{}, fileConfig(nil))
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
	if resp, _ := adminDo(t, l.admin, "GET", "/healthz", "", nil); resp.StatusCode != 200 {
		t.Errorf("healthz: got %d, want 200", resp.StatusCode)
	}
	resp, body := adminDo(t, l.admin, "GET", "/admin/config", testAdminToken, nil)
	if resp.StatusCode != 200 || strings.Contains(string(body), testSecret) || strings.Contains(string(body), testAdminToken) {
		t.Errorf("GET /admin/config: got %d, secrets must be redacted:\n%s", resp.StatusCode, body)
	}
}

func TestAdminPutConfig(t *testing.T) {
	t.Parallel()
	app := echoApp(t)
	l := newLiveConfig(t, &fakeSandboxes{}, noSandboxes{}, fileConfig(nil))
	before, _ := os.ReadFile(l.path)
	tok := mintFor(t, l.store.Load(), "*", time.Minute)

	bad := []byte(fileConfig(nil) + "limits:\n  per_ip: {rate: fast}\n")
	resp, body := adminDo(t, l.admin, "PUT", "/admin/config", testAdminToken, bad)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "previewgate.yaml:11:18: ") {
		t.Fatalf("bad PUT: got %d %s, want 400 with LINE:COL", resp.StatusCode, body)
	}
	if after, _ := os.ReadFile(l.path); !bytes.Equal(after, before) {
		t.Fatal("bad PUT changed the file")
	}
	resp, body = adminDo(t, l.admin, "POST", "/admin/config/validate", testAdminToken, bad)
	if resp.StatusCode != 400 {
		t.Fatalf("validate bad: got %d %s, want 400", resp.StatusCode, body)
	}

	good := []byte(fileConfig(map[string]string{"docs.example.test": app.URL}))
	if resp, body := adminDo(t, l.admin, "POST", "/admin/config/validate", testAdminToken, good); resp.StatusCode != 200 {
		t.Fatalf("validate good: got %d %s", resp.StatusCode, body)
	}
	if r := request(t, l.srv, "GET", "docs.example.test", "/", tok); r.StatusCode != 404 {
		t.Fatalf("route before PUT: got %d, want 404", r.StatusCode)
	}
	resp, body = adminDo(t, l.admin, "PUT", "/admin/config", testAdminToken, good)
	if resp.StatusCode != 200 {
		t.Fatalf("good PUT: got %d %s", resp.StatusCode, body)
	}
	if after, _ := os.ReadFile(l.path); !bytes.Equal(after, good) {
		t.Fatal("good PUT did not write the file")
	}
	if bak, _ := os.ReadFile(l.path + ".bak"); !bytes.Equal(bak, before) {
		t.Fatal("good PUT did not keep the previous file as .bak")
	}
	if r := request(t, l.srv, "GET", "docs.example.test", "/", tok); r.StatusCode != 200 {
		t.Fatalf("route after PUT: got %d, want 200", r.StatusCode)
	}
}

// TestReloadUnderLoad rewrites the config file 50 times, alternating valid
// and invalid versions, while clients keep requesting and hold WebSockets:
// no request fails, no socket closes, and each valid version's new route
// answers soon after the write.
func TestReloadUnderLoad(t *testing.T) {
	app := echoApp(t)
	routes := map[string]string{"stable.example.test": app.URL}
	l := newLiveConfig(t, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, noSandboxes{}, fileConfig(routes))
	tok := mintFor(t, l.store.Load(), "*", 10*time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var sockets []*websocket.Conn
	for range 4 {
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(l.srv.URL, "http")+"/ws", &websocket.DialOptions{
			Host: "sandbox-abc." + testDomain, HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Read(ctx) // hello
		sockets = append(sockets, c)
	}

	var failures, requests atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{}
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				for _, host := range []string{"stable.example.test", "sandbox-abc." + testDomain} {
					req, _ := http.NewRequestWithContext(ctx, "GET", l.srv.URL+"/", nil)
					req.Host = host
					req.Header.Set("Authorization", "Bearer "+tok)
					resp, err := client.Do(req)
					if ctx.Err() != nil {
						return
					}
					requests.Add(1)
					if err != nil || resp.StatusCode != 200 {
						failures.Add(1)
						t.Errorf("request to %s during reloads: %v %v", host, err, resp)
					}
					if resp != nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			}
		})
	}

	var slowest time.Duration
	for i := range 50 {
		if i%2 == 1 {
			// Invalid: unknown key. The old config keeps serving.
			os.WriteFile(l.path, []byte(fileConfig(routes)+"bogus_key: 1\n"), 0o600)
			waitResult(t, l.results, config.ResultFailure)
			continue
		}
		host := fmt.Sprintf("r%d.example.test", i)
		routes[host] = app.URL
		written := time.Now()
		os.WriteFile(l.path, []byte(fileConfig(routes)), 0o600)
		for {
			r := request(t, l.srv, "GET", host, "/", tok)
			if r.StatusCode == 200 {
				break
			}
			if time.Since(written) > 5*time.Second {
				t.Fatalf("route %s not answering 5s after the write (got %d)", host, r.StatusCode)
			}
			time.Sleep(10 * time.Millisecond)
		}
		slowest = max(slowest, time.Since(written))
		waitResult(t, l.results, config.ResultSuccess)
	}
	cancel()
	wg.Wait()
	t.Logf("%d requests during 50 rewrites, %d failed; slowest new route answered %v after its write",
		requests.Load(), failures.Load(), slowest)

	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	for i, c := range sockets {
		if err := c.Write(wctx, websocket.MessageText, []byte("still there")); err != nil {
			t.Fatalf("socket %d closed by reloads: %v", i, err)
		}
		if _, msg, err := c.Read(wctx); err != nil || string(msg) != "still there" {
			t.Fatalf("socket %d: got %q %v after reloads", i, msg, err)
		}
		c.Close(websocket.StatusNormalClosure, "")
	}
	resp, body := adminDo(t, l.admin, "GET", "/metrics", testAdminToken, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `previewgate_config_reloads_total{result="failure"} 25`) {
		t.Errorf("metrics after 25 bad reloads: got %d\n%s", resp.StatusCode, grepLines(body, "reloads"))
	}
}

func waitResult(t *testing.T, results chan string, want string) {
	t.Helper()
	select {
	case got := <-results:
		if got != want {
			t.Fatalf("got reload %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no reload result (want %s)", want)
	}
}

func grepLines(b []byte, sub string) string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestAdminSandboxesMatchDocker lists, stops and removes real sandboxes
// through the admin API and checks Docker agrees.
func TestAdminSandboxesMatchDocker(t *testing.T) {
	e := newDockerEnv(t, nil)
	ids := []string{uniqueID(t, "adm-a"), uniqueID(t, "adm-b")}
	for _, id := range ids {
		wantStatus(t, e.get(id, "/"), 200)
	}
	e.cfg.AdminToken = testAdminToken
	admin := httptest.NewServer(NewAdmin(AdminOptions{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr.Manager, Log: testLogger(t)}))
	defer admin.Close()

	resp, body := adminDo(t, admin, "GET", "/admin/sandboxes", testAdminToken, nil)
	var list []struct {
		ID, Template, State string
		UptimeSeconds       float64 `json:"uptime_seconds"`
	}
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list: %d %s %v", resp.StatusCode, body, err)
	}
	dockerList, err := e.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", sandboxmgr.LabelManaged+"=true"),
			filters.Arg("label", dockertest.LabelRun+"="+dockertest.RunID()),
			filters.Arg("label", "previewgate.test.env="+t.Name()))})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range list {
		got[s.ID] = s.State
	}
	for _, c := range dockerList {
		if got[c.Labels[sandboxmgr.LabelSandbox]] != c.State {
			t.Errorf("sandbox %s: admin says %q, Docker says %q", c.Labels[sandboxmgr.LabelSandbox], got[c.Labels[sandboxmgr.LabelSandbox]], c.State)
		}
	}
	for _, id := range ids {
		if got[id] != "running" {
			t.Errorf("sandbox %s: got state %q in the list, want running", id, got[id])
		}
	}

	if resp, body := adminDo(t, admin, "POST", "/admin/sandboxes/"+ids[0]+"/stop", testAdminToken, nil); resp.StatusCode != 200 {
		t.Fatalf("stop: %d %s", resp.StatusCode, body)
	}
	if st := e.onlyContainer(ids[0]).State; st != "exited" {
		t.Fatalf("after stop: Docker state %q, want exited", st)
	}
	if resp, body := adminDo(t, admin, "DELETE", "/admin/sandboxes/"+ids[1], testAdminToken, nil); resp.StatusCode != 200 {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	if n := len(e.containers(ids[1])); n != 0 {
		t.Fatalf("after delete: %d containers, want 0", n)
	}
	if resp, _ := adminDo(t, admin, "DELETE", "/admin/sandboxes/no-such-sandbox", testAdminToken, nil); resp.StatusCode != 404 {
		t.Fatalf("delete unknown: got %d, want 404", resp.StatusCode)
	}
	if resp, _ := adminDo(t, admin, "POST", "/admin/sandboxes/Bad_Id/stop", testAdminToken, nil); resp.StatusCode != 400 {
		t.Fatalf("stop malformed: got %d, want 400", resp.StatusCode)
	}
}
