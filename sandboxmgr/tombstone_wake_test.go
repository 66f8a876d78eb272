package sandboxmgr

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// afterWake is an engine whose Start and Resume are followed by a hook:
// the first lookup by name (the wake's; the events and the probe look up
// by ID) after one of them that finds that container running calls after
// (once) before its caller sees the answer. That is the moment a wake's
// start or unpause is done and the wake has not yet checked for a DELETE
// on another replica (runner.removedElsewhere).
type afterWake struct {
	runtime.Runtime
	mu    sync.Mutex // guards woken and after
	woken string     // container started or unpaused, its lookup not yet seen
	after func()
}

func (e *afterWake) Start(ctx context.Context, id string) error {
	err := e.Runtime.Start(ctx, id)
	e.woke(id, err)
	return err
}

func (e *afterWake) Resume(ctx context.Context, id string) error {
	err := e.Runtime.Resume(ctx, id)
	e.woke(id, err)
	return err
}

func (e *afterWake) woke(id string, err error) {
	if err == nil {
		e.mu.Lock()
		e.woken = id
		e.mu.Unlock()
	}
}

func (e *afterWake) Lookup(ctx context.Context, name string) (runtime.Instance, error) {
	c, err := e.Runtime.Lookup(ctx, name)
	e.mu.Lock()
	var f func()
	if err == nil && e.woken != "" && c.ID == e.woken && c.State == runtime.StateRunning && name != c.ID {
		f, e.after, e.woken = e.after, nil, ""
	}
	e.mu.Unlock()
	if f != nil {
		f()
	}
	return c, err
}

// TestDockerWakeRemovedOnAnotherReplica: a DELETE through replica A while
// replica B's wake starts a stopped container (or unpauses a paused one)
// holds, as it does for a create (TestDockerRemovalTwoReplicas): the
// DELETE lands once B's start or unpause is done and before B hands the
// sandbox out; B's wake fails with runtime.ErrNotFound saying the sandbox was
// removed while it started (the admin API's 404), and nothing of the
// sandbox runs once both answered. Two managers on one engine are two
// replicas that share nothing else. Without B's check after its start
// (removedElsewhere), B went on to probe the container A had removed and
// failed with the probe's lookup error ("no such sandbox"), not saying
// it was removed.
func TestDockerWakeRemovedOnAnotherReplica(t *testing.T) {
	cli, cfg, tpl, store := dockerReplicas(t)
	labels := cfg.Labels
	replica := func(wrap func(runtime.Runtime) runtime.Runtime) *Manager { return dockerReplica(t, cfg, store, wrap) }
	hooked := &afterWake{}
	a := replica(func(e runtime.Runtime) runtime.Runtime { return e })
	b := replica(func(e runtime.Runtime) runtime.Runtime { hooked.Runtime = e; return hooked })
	running := func(id string) int {
		f := filters.NewArgs(filters.Arg("label", runtime.LabelSandbox+"="+id))
		for k, v := range labels {
			f.Add("label", k+"="+v)
		}
		cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}

	for _, tc := range []struct {
		name  string
		sleep func(m *Manager, ctx context.Context, id string) error
	}{
		{"start of a stopped container", (*Manager).Stop},
		{"unpause of a paused container", (*Manager).Pause},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			id := dockertest.UniqueID("wakerm")
			if _, err := b.Ensure(ctx, id, tpl); err != nil {
				t.Fatal(err)
			}
			if err := tc.sleep(b, ctx, id); err != nil {
				t.Fatal(err)
			}
			var delErr error
			fired := false
			hooked.mu.Lock()
			hooked.after = func() { fired, delErr = true, a.Remove(ctx, id) }
			hooked.mu.Unlock()
			_, err := b.Ensure(ctx, id, tpl)
			if !fired {
				t.Fatalf("B's wake (%v) never looked up its container running after waking it: the DELETE did not come between", err)
			}
			if delErr != nil {
				t.Errorf("DELETE on A once B's wake woke the container: %v, want nil (it finds and removes it)", delErr)
			}
			if !errors.Is(err, errRemovedMeanwhile) {
				t.Errorf("B's wake begun before A's DELETE: got %v, want runtime.ErrNotFound saying it was removed while it started", err)
			}
			if n := running(id); n != 0 {
				t.Errorf("after A's DELETE and B's wake answered: %d containers of %s, want none", n, id)
			}
		})
	}
}

// countedRecords counts the reads of one sandbox's record.
type countedRecords struct {
	records.Store
	mu    sync.Mutex     // guards reads
	reads map[string]int // by sandbox id
}

func (c *countedRecords) ListRecords(ctx context.Context, labels map[string]string) (map[string]records.Record, error) {
	if id := labels[records.LabelRecord]; id != "" {
		c.mu.Lock()
		c.reads[id]++
		c.mu.Unlock()
	}
	return c.Store.ListRecords(ctx, labels)
}

func (c *countedRecords) take(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.reads[id]
	delete(c.reads, id)
	return n
}

// TestDockerWakeRecordReads: a wake reads its sandbox's record twice,
// whether it creates the container or starts a stopped one: once before
// its first action (the baseline; for a create, the same read clears
// what a sandbox removed behind the manager's back left) and once when
// the container runs (tombstone.go). A create used to read it three
// times: the baseline and the clear were two reads back to back. Every
// read is an API call on Kubernetes (docs/kubernetes.md).
func TestDockerWakeRecordReads(t *testing.T) {
	_, cfg, tpl, store := dockerReplicas(t)
	cfg.RecheckEvery = -1 // its list of every record is no wake's
	rec := &countedRecords{Store: store, reads: map[string]int{}}
	m := dockerReplica(t, cfg, rec, func(e runtime.Runtime) runtime.Runtime { return e })
	ctx := t.Context()
	id := dockertest.UniqueID("reads")
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"create", func() error { _, err := m.Ensure(ctx, id, tpl); return err }},
		{"start of the stopped container", func() error {
			if err := m.Stop(ctx, id); err != nil {
				return err
			}
			rec.take(id) // the stop's, if any
			_, err := m.Ensure(ctx, id, tpl)
			return err
		}},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if n := rec.take(id); n != 2 {
			t.Errorf("%s: read the record %d times, want 2", step.name, n)
		}
	}
}

// dockerReplicas is the setup of tests with several managers on the real
// engine, each a replica: a client, their config (a scope of their own,
// removed with its containers when t ends), a template and their records
// store. One store: a Docker engine is served by one gateway per scope,
// and managers sharing its store stand in for Kubernetes replicas sharing
// the API server.
func dockerReplicas(t *testing.T) (*client.Client, Config, *config.Template, records.Store) {
	cli := dockertest.Client(t) // skips under -short
	labels := dockertest.ScopedLabels()
	t.Cleanup(func() { // registered first: runs after the managers close
		ctx := context.Background()
		f := filters.NewArgs()
		for k, v := range labels {
			f.Add("label", k+"="+v)
		}
		if cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
			for _, c := range cs {
				_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
		}
	})
	tpl := &config.Template{Name: "testapp", Image: dockertest.TestAppImage(t), Port: 3000,
		Memory: 64 << 20, CPUs: 0.5, Pids: 64, ReadOnly: true,
		Ready: config.Ready{Path: "/", Timeout: config.Duration(30 * time.Second)}}
	cfg := Config{Network: dockertest.Network(t), Labels: labels, ReapEvery: -1,
		Templates: func(string) *config.Template { return tpl }}
	return cli, cfg, tpl, dockertest.Records(t)
}

// dockerReplica starts a manager of cfg on the real engine, reached
// through wrap, its records in store; it is closed when t ends.
func dockerReplica(t *testing.T, cfg Config, store records.Store, wrap func(runtime.Runtime) runtime.Runtime) *Manager {
	t.Helper()
	rt, err := docker.New(docker.Options{Network: cfg.Network, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := New(cfg, wrap(rt), testRecords(store, cfg), log)
	t.Cleanup(func() { m.Close() })
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return m
}
