package sandboxmgr_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Tests in this file run against the real Docker Engine, with containers made
// from the testapp image. Each test has its own network and sandbox ids;
// dockertest removes what they create (t.Cleanup, then TestMain).

func TestMain(m *testing.M) { dockertest.Main(m) }

var idSeq atomic.Int64

// newID returns a sandbox id no other test (or test process) uses.
func newID() string {
	return fmt.Sprintf("t%s-%d", dockertest.RunID(), idSeq.Add(1))
}

type env struct {
	cli      *client.Client
	cfg      sandboxmgr.Config
	rt       mgrtest.Runtime     // the engine (Host), the records store
	listener sandboxmgr.Listener // set on the managers e makes; may be nil
	network  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cli := dockertest.Client(t)
	network := dockertest.Network(t)
	// The managers e makes share one records store, as a Docker gateway's
	// manager and its successor after a restart do.
	return &env{cli: cli, network: network, cfg: sandboxmgr.Config{Network: network, Labels: dockertest.ScopedLabels()},
		rt: mgrtest.Runtime{Records: dockertest.Records(t)}}
}

// name is the name of sandbox id's instance in e's scope.
func (e *env) name(id string) string { return runtime.Name(runtime.Stamp(e.cfg.Labels), id) }

// manager starts a Manager on e's network; it is closed when t ends.
func (e *env) manager(t *testing.T) *mgrtest.Manager {
	t.Helper()
	m, err := mgrtest.New(mgrtest.Config{Config: e.cfg, Runtime: e.rt}, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	m.SetListener(e.listener)
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return m
}

func testTemplate(t *testing.T, env map[string]string) *config.Template {
	return &config.Template{
		Name:     "testapp",
		Image:    dockertest.TestAppImage(t),
		Port:     3000,
		Env:      env,
		Memory:   64 << 20,
		CPUs:     0.5,
		Pids:     64,
		ReadOnly: true,
		Ready:    config.Ready{Path: "/", Timeout: config.Duration(30 * time.Second)},
	}
}

// containers lists the containers named for id (any state).
func (e *env) containers(t *testing.T, id string) []container.Summary {
	t.Helper()
	list, err := e.cli.ContainerList(context.Background(), container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", runtime.LabelSandbox+"="+id)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// get asks the app at ep for its echo JSON.
func get(t *testing.T, ep sandboxmgr.Endpoint) {
	t.Helper()
	resp, err := http.Get("http://" + ep.Addr + "/hello?x=1")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	var echo struct {
		Method, Path, Query string
	}
	if err := json.NewDecoder(resp.Body).Decode(&echo); err != nil {
		t.Fatalf("decode echo: %v", err)
	}
	if resp.StatusCode != 200 || echo.Path != "/hello" || echo.Query != "x=1" {
		t.Errorf("got %d %+v, want 200 /hello x=1", resp.StatusCode, echo)
	}
}

func TestDockerCreateNeverSeenID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager(t)
	id := newID()
	ep, err := m.Ensure(t.Context(), id, testTemplate(t, nil))
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	get(t, ep)

	list := e.containers(t, id)
	if len(list) != 1 {
		t.Fatalf("got %d containers, want 1", len(list))
	}
	c, err := e.cli.ContainerInspect(t.Context(), list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	h := c.HostConfig
	// Joined by ID: the kept one of the networks of its name.
	net, err := e.cli.NetworkInspect(t.Context(), string(h.NetworkMode), network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"name", c.Name, "/" + e.name(id)},
		{"label managed", c.Config.Labels[runtime.LabelManaged], "true"},
		{"label template", c.Config.Labels[runtime.LabelTemplate], "testapp"},
		{"test label", c.Config.Labels[dockertest.LabelTest], "1"},
		{"network", net.Name, e.network},
		{"no published ports", len(h.PortBindings), 0},
		{"no mounts", len(c.Mounts), 0},
		{"cap drop", fmt.Sprint(h.CapDrop), "[ALL]"},
		{"no-new-privileges", fmt.Sprint(h.SecurityOpt), "[no-new-privileges:true]"},
		{"memory", h.Memory, int64(64 << 20)},
		{"pids", fmt.Sprint(*h.PidsLimit), "64"},
		{"read-only", h.ReadonlyRootfs, true},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	n, err := e.cli.NetworkInspect(t.Context(), e.network, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Options["com.docker.network.bridge.enable_icc"]; got != "false" {
		t.Errorf("got enable_icc %q, want false", got)
	}
}

func TestDockerWake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		put  func(t *testing.T, e *env, m *mgrtest.Manager, id string)
	}{
		{"stopped is started", func(t *testing.T, _ *env, m *mgrtest.Manager, id string) {
			if err := m.Stop(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}},
		{"paused is unpaused", func(t *testing.T, e *env, _ *mgrtest.Manager, id string) {
			if err := e.cli.ContainerPause(t.Context(), e.name(id)); err != nil {
				t.Fatal(err)
			}
		}},
		{"killed is restarted", func(t *testing.T, e *env, _ *mgrtest.Manager, id string) {
			if err := e.cli.ContainerKill(t.Context(), e.name(id), "KILL"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			m := e.manager(t)
			id := newID()
			tpl := testTemplate(t, nil)
			ep, err := m.Ensure(t.Context(), id, tpl)
			if err != nil {
				t.Fatalf("first Ensure: %v", err)
			}
			tc.put(t, e, m, id)
			// Changes made outside the manager are seen after the gateway's
			// dial fails and it calls Forget.
			m.Sandbox(id).Forget(ep.Addr)
			ep, err = m.Ensure(t.Context(), id, tpl)
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			get(t, ep)
			c, err := e.cli.ContainerInspect(t.Context(), e.name(id))
			if err != nil {
				t.Fatal(err)
			}
			if c.State.Status != "running" {
				t.Errorf("got state %q, want running", c.State.Status)
			}
			if n := len(e.containers(t, id)); n != 1 {
				t.Errorf("got %d containers, want 1", n)
			}
		})
	}
}

func TestDockerConcurrentColdStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager(t)
	id := newID()
	// A slow dev server: every caller is held until it listens.
	tpl := testTemplate(t, map[string]string{"LISTEN_DELAY": "300ms"})
	const n = 200
	var wg sync.WaitGroup
	addrs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			ep, err := m.Ensure(t.Context(), id, tpl)
			addrs[i], errs[i] = ep.Addr, err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if addrs[i] != addrs[0] {
			t.Fatalf("caller %d got %s, caller 0 got %s", i, addrs[i], addrs[0])
		}
	}
	if got := len(e.containers(t, id)); got != 1 {
		t.Errorf("got %d containers, want 1", got)
	}
	get(t, sandboxmgr.Endpoint{Addr: addrs[0]})
}

func TestDockerRestartReusesContainer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m1 := e.manager(t)
	id := newID()
	tpl := testTemplate(t, nil)
	ep1, err := m1.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatal(err)
	}
	before := e.containers(t, id)
	m1.Close()

	m2 := e.manager(t) // a new gateway process on the same Docker state
	list, err := m2.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var adopted []sandboxmgr.Info // other tests of this process share the labels
	for _, s := range list {
		if s.ID == id {
			adopted = append(adopted, s)
		}
	}
	if len(adopted) != 1 || adopted[0].State != "running" || adopted[0].StartedAt.IsZero() {
		t.Errorf("got %+v, want %s once, running, with a start time", adopted, id)
	}
	ep2, err := m2.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if ep2.Addr != ep1.Addr {
		t.Errorf("got addr %s, want %s", ep2.Addr, ep1.Addr)
	}
	get(t, ep2)
	after := e.containers(t, id)
	if len(after) != 1 || after[0].ID != before[0].ID {
		t.Errorf("got containers %v, want only %s", after, before[0].ID)
	}
}

func TestDockerNeverListens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager(t)
	tpl := testTemplate(t, map[string]string{"NEVER_LISTEN": "1"})
	tpl.Ready.Timeout = config.Duration(1500 * time.Millisecond)
	_, err := m.Ensure(t.Context(), newID(), tpl)
	if !errors.Is(err, sandboxmgr.ErrNotReady) {
		t.Fatalf("got %v, want ErrNotReady", err)
	}
}

func TestDockerMissingImage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager(t)
	tpl := testTemplate(t, nil)
	tpl.Image = "previewgate-no-such-image:" + dockertest.RunID()
	id := newID()
	_, err := m.Ensure(t.Context(), id, tpl)
	if !errors.Is(err, runtime.ErrNoImage) {
		t.Fatalf("got %v, want ErrNoImage", err)
	}
	if n := len(e.containers(t, id)); n != 0 {
		t.Errorf("got %d containers, want 0", n)
	}
}

func TestDockerUnreachable(t *testing.T) {
	t.Parallel()
	m, err := mgrtest.New(mgrtest.Config{Config: sandboxmgr.Config{}, Runtime: mgrtest.Runtime{Host: "unix:///nonexistent/previewgate-test.sock"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Start(t.Context()); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("Start: got %v, want ErrUnavailable", err)
	}
	tpl := &config.Template{Name: "x", Image: "x", Ready: config.Ready{Timeout: config.Duration(time.Minute)}}
	if _, err := m.Ensure(t.Context(), "a", tpl); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("Ensure: got %v, want ErrUnavailable", err)
	}
}

// Two replicas racing to create one sandbox end up sharing one container:
// the loser's create gets 409 and adopts the winner's.
func TestDockerTwoReplicasRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	replicas := []*mgrtest.Manager{e.manager(t), e.manager(t)}
	for round := range 3 {
		id := newID()
		tpl := testTemplate(t, nil)
		var wg sync.WaitGroup
		addrs := make([]string, 2*len(replicas))
		errs := make([]error, len(addrs))
		for i := range addrs {
			wg.Go(func() {
				ep, err := replicas[i%len(replicas)].Ensure(t.Context(), id, tpl)
				addrs[i], errs[i] = ep.Addr, err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d caller %d: %v", round, i, err)
			}
			if addrs[i] != addrs[0] {
				t.Errorf("round %d caller %d got %s, want %s", round, i, addrs[i], addrs[0])
			}
		}
		if n := len(e.containers(t, id)); n != 1 {
			t.Errorf("round %d: got %d containers, want 1", round, n)
		}
	}
}

func TestDockerBuildImage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	images := e.manager(t).Runtime.Capabilities().Images
	for _, tc := range []struct {
		name       string
		dockerfile string
		wantErr    bool
	}{
		{"ok", "FROM scratch\nCOPY hello.txt /hello.txt\n", false},
		{"failing step", "FROM scratch\nCOPY missing.txt /x\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tag := fmt.Sprintf("previewgate-buildtest:%s-%s", dockertest.RunID(), tc.name[:2])
			err := images.Build(t.Context(), tag, tarOf(t, map[string]string{"Dockerfile": tc.dockerfile, "hello.txt": "hi"}), runtime.Shared(e.cfg.Labels))
			if tc.wantErr != (err != nil) {
				t.Fatalf("got %v, want error %v", err, tc.wantErr)
			}
			ok, err := images.Has(t.Context(), tag)
			if err != nil || ok == tc.wantErr {
				t.Errorf("HasImage: got %v, %v, want %v", ok, err, !tc.wantErr)
			}
			if ok {
				img, err := e.cli.ImageInspect(t.Context(), tag)
				if err != nil {
					t.Fatal(err)
				}
				if img.Config.Labels[dockertest.LabelRun] != dockertest.RunID() {
					t.Errorf("got labels %v, want the test labels", img.Config.Labels)
				}
			}
		})
	}
}

func tarOf(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
