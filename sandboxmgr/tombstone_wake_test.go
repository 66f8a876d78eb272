package sandboxmgr

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// countedRecords counts the reads of one sandbox's record (loadRecord).
type countedRecords struct {
	runtime.Records
	mu    sync.Mutex     // guards reads
	reads map[string]int // by sandbox id
}

func (c *countedRecords) ListRecords(ctx context.Context, labels map[string]string) (map[string]runtime.Record, error) {
	if id := labels[runtime.LabelRecord]; id != "" {
		c.mu.Lock()
		c.reads[id]++
		c.mu.Unlock()
	}
	return c.Records.ListRecords(ctx, labels)
}

func (c *countedRecords) take(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.reads[id]
	delete(c.reads, id)
	return n
}

// countingEngine is an engine whose records are counted.
type countingEngine struct {
	engine
	rec *countedRecords
}

func (e countingEngine) Capabilities() runtime.Capabilities {
	c := e.engine.Capabilities()
	e.rec.Records, c.Records = c.Records, e.rec
	return c
}

// TestDockerWakeRecordReads: a wake reads its sandbox's record twice,
// whether it creates the container or starts a stopped one: once before
// its first action (the baseline; for a create, the same read clears
// what a sandbox removed behind the manager's back left) and once when
// the container runs (tombstone.go). A create used to read it three
// times: the baseline and the clear were two reads back to back. Every
// read is an API call on Kubernetes (docs/kubernetes.md).
func TestDockerWakeRecordReads(t *testing.T) {
	_, cfg, tpl := dockerReplicas(t)
	cfg.RecheckEvery = -1 // its list of every record is no wake's
	rec := &countedRecords{reads: map[string]int{}}
	m := dockerReplica(t, cfg, func(e engine) engine { return countingEngine{e, rec} })
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
// removed with its containers and records when t ends) and a template.
func dockerReplicas(t *testing.T) (*client.Client, Config, *config.Template) {
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
		if vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f}); err == nil {
			for _, v := range vols.Volumes {
				_ = cli.VolumeRemove(ctx, v.Name, true)
			}
		}
	})
	tpl := &config.Template{Name: "testapp", Image: dockertest.TestAppImage(t), Port: 3000,
		Memory: 64 << 20, CPUs: 0.5, Pids: 64, ReadOnly: true,
		Ready: config.Ready{Path: "/", Timeout: config.Duration(30 * time.Second)}}
	cfg := Config{Network: dockertest.Network(t), Labels: labels, ReapEvery: -1,
		Templates: func(string) *config.Template { return tpl }}
	return cli, cfg, tpl
}

// dockerReplica starts a manager of cfg on the real engine, reached
// through wrap; it is closed when t ends.
func dockerReplica(t *testing.T, cfg Config, wrap func(engine) engine) *Manager {
	t.Helper()
	rt, err := docker.New(docker.Options{Network: cfg.Network, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := newManager(cfg, log, wrap(rt))
	t.Cleanup(func() { m.Close() })
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return m
}
