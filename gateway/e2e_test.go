package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/metrics"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
	"github.com/previewgate/previewgate/traffic"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// countingSandboxes wraps the real manager and counts every call that can
// look up or touch a sandbox: the seam that proves rejected requests never
// reach Docker.
type countingSandboxes struct {
	*mgrtest.Manager
	ensures atomic.Int32
}

func (c *countingSandboxes) Ensure(ctx context.Context, id string, tpl *config.Template) (sandboxmgr.Endpoint, error) {
	c.ensures.Add(1)
	return c.Manager.Ensure(ctx, id, tpl)
}

func (c *countingSandboxes) EnsureWith(ctx context.Context, id string, tpl *config.Template, o sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	c.ensures.Add(1)
	return c.Manager.EnsureWith(ctx, id, tpl, o)
}

func (c *countingSandboxes) Sandbox(id string) sandboxmgr.Handle {
	return countingHandle{c.Manager.Sandbox(id), c}
}

// countingHandle counts the Ensures and Wakes through a handle.
type countingHandle struct {
	sandboxmgr.Handle
	c *countingSandboxes
}

func (h countingHandle) Ensure(ctx context.Context, tpl *config.Template, o sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	h.c.ensures.Add(1)
	return h.Handle.Ensure(ctx, tpl, o)
}

func (h countingHandle) Wake(tpl *config.Template, o sandboxmgr.Options) {
	h.c.ensures.Add(1)
	h.Handle.Wake(tpl, o)
}

// dockerEnv is one integration test's world: a real manager on its own
// network and a gateway in front of it.
type dockerEnv struct {
	t       *testing.T
	cli     *client.Client
	cfg     *config.Config
	network string
	mgr     *countingSandboxes
	labels  map[string]string // the manager's scope
	metrics *metrics.Metrics  // what the manager and the gateway report
	traffic *traffic.Recorder // the per-sandbox request log
	gw      *Gateway
	server  *Server
	srv     *httptest.Server // e.server's address
	recheck time.Duration    // the manager's RecheckEvery; zero: its default
	records records.Store    // the gateway's records store, kept across a restart
}

func newDockerEnv(t *testing.T, edit func(*config.Config)) *dockerEnv {
	t.Helper()
	cli := dockertest.Client(t)
	image := dockertest.TestAppImage(t)
	cfg := testConfig()
	cfg.Templates["app"].Image = image
	cfg.Templates["app"].Ready = config.Ready{Path: "/", Timeout: config.Duration(20 * time.Second)}
	if edit != nil {
		edit(cfg)
		cfg.ApplyDefaults()
	}
	e := &dockerEnv{t: t, cli: cli, cfg: cfg, network: dockertest.Network(t)}
	e.start()
	return e
}

// start runs a fresh manager and gateway on the same Docker state, as a
// gateway restart would.
func (e *dockerEnv) start() {
	e.t.Helper()
	// Each env's manager sees only its own test's containers; a restart
	// (a second start) keeps the scope.
	labels := dockertest.Labels()
	labels[dockertest.LabelCase] = e.t.Name()
	e.labels = labels
	e.metrics = metrics.New()
	if e.records == nil {
		e.records = dockertest.Records(e.t)
	}
	mgr, err := mgrtest.New(mgrtest.Config{Runtime: mgrtest.Runtime{Host: e.cfg.Docker.Host, Records: e.records}, Config: sandboxmgr.Config{Network: e.network, Labels: labels, RecheckEvery: e.recheck,
		MaxConcurrentStarts: e.cfg.Limits.MaxConcurrentStarts, MaxRunning: e.cfg.Limits.MaxRunning,
		Templates: func(name string) *config.Template { return e.cfg.Templates[name] },
		ListTemplates: func() []*config.Template {
			l := make([]*config.Template, 0, len(e.cfg.Templates))
			for _, t := range e.cfg.Templates {
				l = append(l, t)
			}
			return l
		},
		Observer: e.metrics}}, testkit.Logger(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	e.mgr = &countingSandboxes{Manager: mgr}
	e.traffic = traffic.New(traffic.Options{})
	e.gw, err = New(e.cfg, e.mgr, Options{Metrics: e.metrics, Traffic: e.traffic, Records: mgr.Records}, testkit.Logger(e.t))
	if err != nil {
		e.t.Fatalf("gateway.New: %v", err)
	}
	e.t.Cleanup(e.gw.Close)
	e.server = NewServer(e.cfg, e.gw, testkit.Logger(e.t))
	e.srv = serve(e.t, e.server)
	mgr.SetListener(e.gw)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil && e.cfg.Docker.Host == "" {
		e.t.Fatalf("manager start: %v", err)
	}
	e.t.Cleanup(func() { mgr.Close() })
}

func (e *dockerEnv) get(id, path string) *http.Response {
	e.t.Helper()
	return testkit.Request(e.t, e.srv, "GET", "sandbox-"+id+"."+testDomain, path, testkit.Mint(e.t, e.cfg, id, time.Minute))
}

// containers lists the containers Docker has for sandbox id.
func (e *dockerEnv) containers(id string) []container.Summary {
	e.t.Helper()
	return dockertest.Containers(e.t, e.cli, runtime.LabelSandbox+"="+id)
}

func (e *dockerEnv) onlyContainer(id string) container.Summary {
	e.t.Helper()
	return dockertest.OnlyContainer(e.t, e.cli, runtime.LabelSandbox+"="+id)
}

func wantStatus(t *testing.T, resp *http.Response, want int) []byte {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("got %d (%s), want %d", resp.StatusCode, body, want)
	}
	return body
}

func TestDockerCreateOnFirstRequest(t *testing.T) {
	e := newDockerEnv(t, nil)
	id := dockertest.UniqueID("create")
	body := wantStatus(t, e.get(id, "/hello"), 200)
	var echo struct{ Path, Host string }
	if err := json.Unmarshal(body, &echo); err != nil || echo.Path != "/hello" {
		t.Fatalf("got %s (%v), want the test app's echo of /hello", body, err)
	}
	c := e.onlyContainer(id)
	if want := mgrtest.Name(e.labels, id); c.Names[0] != "/"+want || c.Labels[runtime.LabelManaged] != "true" ||
		c.Labels[runtime.LabelTemplate] != "app" {
		t.Fatalf("got container %v %v, want name %s with managed labels", c.Names, c.Labels, want)
	}
}

func TestDockerWakeStoppedAndPaused(t *testing.T) {
	e := newDockerEnv(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		sleep  func(id string) error
		wantSt string
	}{
		{"stopped", func(id string) error { return e.cli.ContainerStop(ctx, id, container.StopOptions{}) }, "exited"},
		{"paused", func(id string) error { return e.cli.ContainerPause(ctx, id) }, "paused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := dockertest.UniqueID(tc.name)
			wantStatus(t, e.get(id, "/"), 200)
			c := e.onlyContainer(id)
			if err := tc.sleep(c.ID); err != nil {
				t.Fatal(err)
			}
			if got := e.onlyContainer(id).State; got != tc.wantSt {
				t.Fatalf("got state %q, want %q", got, tc.wantSt)
			}
			// The manager learns about the change from Docker (events or a
			// failed dial); either way the next request succeeds.
			wantStatus(t, e.get(id, "/"), 200)
			if got := e.onlyContainer(id); got.ID != c.ID || got.State != "running" {
				t.Fatalf("got container %s in state %s, want %s running", got.ID, got.State, c.ID)
			}
		})
	}
}

func TestDockerWebSocketAndSSE(t *testing.T) {
	e := newDockerEnv(t, nil)
	id := dockertest.UniqueID("stream")
	host := "sandbox-" + id + "." + testDomain
	tok := testkit.Mint(t, e.cfg, id, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, _, err := dialSocket(ctx, e.srv, host, tok)
	if err != nil {
		t.Fatalf("websocket dial through gateway: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("echo me")); err != nil {
		t.Fatal(err)
	}
	var sawPush, sawEcho bool
	for !(sawPush && sawEcho) {
		_, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (push %v, echo %v)", err, sawPush, sawEcho)
		}
		sawPush = sawPush || strings.HasPrefix(string(msg), "tick")
		sawEcho = sawEcho || string(msg) == "echo me"
	}
	c.Close(websocket.StatusNormalClosure, "")

	resp := testkit.Request(t, e.srv, "GET", host, "/sse", tok, "Accept", "text/event-stream")
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || first != "id: 1\n" {
		t.Fatalf("got first line %q (%v)", first, err)
	}
	gotFirst := time.Now()
	rest, _ := io.ReadAll(br)
	// The app streams 20 events 100ms apart. Had the gateway buffered the
	// response, the first event would arrive together with the end.
	if since := time.Since(gotFirst); since < time.Second {
		t.Fatalf("stream ended %v after the first event, want the first event streamed ahead of the rest", since)
	}
	if !strings.Contains(string(rest), "data: event 20") {
		t.Fatalf("stream incomplete: %q", rest)
	}
}

func TestDockerRestartReusesContainer(t *testing.T) {
	e := newDockerEnv(t, nil)
	id := dockertest.UniqueID("restart")
	wantStatus(t, e.get(id, "/"), 200)
	before := e.onlyContainer(id)
	e.srv.Close()
	e.gw.Close()
	e.mgr.Close()
	e.start()
	wantStatus(t, e.get(id, "/"), 200)
	if after := e.onlyContainer(id); after.ID != before.ID {
		t.Fatalf("got container %s after restart, want %s", after.ID, before.ID)
	}
}

func TestDockerNeverReadyIs504(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) {
		c.Templates["app"].Env = map[string]string{"NEVER_LISTEN": "1"}
		c.Templates["app"].Ready.Timeout = config.Duration(2 * time.Second)
	})
	wantStatus(t, e.get(dockertest.UniqueID("never"), "/"), 504)
}

func TestDockerUnreachableIs503(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) {
		c.Docker.Host = "unix://" + t.TempDir() + "/nothing.sock"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/", nil)
	req.Host = "sandbox-x." + testDomain
	req.Header.Set("Authorization", "Bearer "+testkit.Mint(t, e.cfg, "x", time.Minute))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("request with Docker down: %v (want a quick 503, not a hang)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestDockerRejectedHostsNeverReachDocker(t *testing.T) {
	e := newDockerEnv(t, nil)
	for _, host := range []string{"evil.example", "sandbox-Bad_Id." + testDomain, "sandbox-." + testDomain} {
		resp := testkit.Request(t, e.srv, "GET", host, "/", testkit.Mint(t, e.cfg, "*", time.Minute))
		if resp.StatusCode != 400 && resp.StatusCode != 404 {
			t.Fatalf("%s: got %d, want 400 or 404", host, resp.StatusCode)
		}
	}
	if n := e.mgr.ensures.Load(); n != 0 {
		t.Fatalf("got %d Ensure calls, want 0", n)
	}
}

// TestDockerSandboxIsolation: from inside sandbox A, sandbox B's app port
// is unreachable (inter-container traffic is off on the managed bridge),
// while the gateway reaches both.
func TestDockerSandboxIsolation(t *testing.T) {
	e := newDockerEnv(t, nil)
	a, b := dockertest.UniqueID("iso-a"), dockertest.UniqueID("iso-b")
	wantStatus(t, e.get(a, "/"), 200)
	wantStatus(t, e.get(b, "/"), 200)
	ctr, err := e.cli.ContainerInspect(context.Background(), e.onlyContainer(b).ID)
	if err != nil {
		t.Fatal(err)
	}
	ep := ctr.NetworkSettings.Networks[e.network]
	if ep == nil || ep.IPAddress == "" {
		t.Fatalf("sandbox %s has no address on %s", b, e.network)
	}
	body := wantStatus(t, e.get(a, "/dial?addr="+ep.IPAddress+":3000"), 200)
	var res struct {
		OK  bool   `json:"ok"`
		Err string `json:"err"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("dial report %s: %v", body, err)
	}
	if res.OK {
		t.Fatalf("sandbox %s reached sandbox %s at %s:3000, want it refused", a, b, ep.IPAddress)
	}
	// The gateway itself can: the same address answers through it.
	wantStatus(t, e.get(b, "/"), 200)
	t.Logf("dial from %s to %s:3000: %s", a, ep.IPAddress, res.Err)
}
