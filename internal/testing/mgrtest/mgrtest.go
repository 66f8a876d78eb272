// Package mgrtest makes sandbox managers for tests (for _test.go files
// only): the runtime a test names, its records in that runtime's store,
// and the manager on both, as the serve wiring makes them.
package mgrtest

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Runtime says which runtime a test's manager runs on.
type Runtime struct {
	Host string       // Docker: the engine ("": DOCKER_HOST or the default socket)
	Kube *kube.Config // set: Kubernetes instead of Docker
	// Records is a Docker manager's records store, as its gateway keeps
	// them in its data dir (dockertest.Records; managers sharing one stand
	// in for replicas sharing an API server); nil: none kept. Kubernetes
	// keeps them in its ConfigMaps.
	Records records.Store
}

// Config is a manager's config and the runtime it runs on.
type Config struct {
	sandboxmgr.Config
	Runtime
}

// Manager is a manager made for a test, with what it was made of.
type Manager struct {
	*sandboxmgr.Manager
	Runtime runtime.Runtime
	Records *records.Records
}

// New makes c's manager on the runtime c names, its records in that
// runtime's store (Docker: c.Records), scoped and re-checked as c says.
// It does not start it; Close closes the runtime.
func New(c Config, log *slog.Logger) (*Manager, error) {
	cfg, rt := c.Config, c.Runtime
	var r runtime.Runtime
	store := rt.Records
	if rt.Kube != nil {
		kr, err := kube.New(*rt.Kube, cfg.Labels)
		if err != nil {
			return nil, err
		}
		r, store = kr, kr
		cfg.RecordName = records.Name // its ConfigMaps, as the serve wiring says
	} else {
		dr, err := docker.New(docker.Options{Host: rt.Host, Network: cfg.Network, DialTimeout: time.Second})
		if err != nil {
			return nil, err
		}
		r = dr
	}
	every := cfg.RecheckEvery
	if every == 0 {
		every = sandboxmgr.DefaultRecheckEvery
	}
	recs := records.New(store, records.Options{Labels: runtime.Scoped(cfg.Labels), RecheckEvery: every, LongestWake: cfg.LongestWake, Log: log})
	return &Manager{Manager: sandboxmgr.New(cfg, r, recs, log), Runtime: r, Records: recs}, nil
}

// Cached is sandbox id's ready endpoint, as its snapshot has it.
func (m *Manager) Cached(id string) (sandboxmgr.Endpoint, bool) {
	s := m.Sandbox(id).Snapshot()
	return s.Endpoint, s.Ready
}

// Known is whether the manager knows an instance of id, and its template.
func (m *Manager) Known(id string) (string, bool) {
	s := m.Sandbox(id).Snapshot()
	return s.Template, s.Exists
}

// Name is the name of sandbox id's instance made by a manager of scope
// labels.
func Name(labels map[string]string, id string) string {
	return runtime.Name(runtime.Stamp(labels), id)
}

// ContainerOf is the name of sandbox id's Docker container, whatever the
// scope that made it (or an earlier version's name); "" if there is none.
func ContainerOf(ctx context.Context, cli *client.Client, id string) string {
	f := filters.NewArgs(filters.Arg("name", `^/(pg-s[0-9a-f]{15}-|previewgate-)`+regexp.QuoteMeta(id)+`$`))
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil || len(list) == 0 || len(list[0].Names) == 0 {
		return ""
	}
	return strings.TrimPrefix(list[0].Names[0], "/")
}
