package sandboxmgr_test

import (
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// poolContainers lists the unclaimed pool containers of template in scope.
func (e *env) poolContainers(t *testing.T, scope, template string) []container.Summary {
	t.Helper()
	list, err := e.cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", runtime.LabelPool+"="+template), filters.Arg("label", dockertest.LabelCase+"="+scope))})
	if err != nil {
		t.Fatal(err)
	}
	var out []container.Summary
	for _, c := range list {
		if strings.HasPrefix(c.Names[0], "/previewgate-pool-"+template+"-") && c.State == "running" {
			out = append(out, c)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With pool: 2, a brand-new id is answered by a container that was already
// running before the request; the pool refills to 2; a restarted manager
// keeps the binding.
func TestDockerWarmPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	scope := e.cfg.Labels[dockertest.LabelCase]
	tpl := testTemplate(t, nil)
	tpl.Pool = 2
	e.cfg.ListTemplates = func() []*config.Template { return []*config.Template{tpl} }
	e.cfg.Templates = func(string) *config.Template { return tpl }
	e.cfg.PoolEvery = 100 * time.Millisecond
	m := e.manager(t)
	waitFor(t, "a full pool", func() bool { return m.PoolSize(tpl.Name) == 2 })

	id := newID()
	t0 := time.Now()
	ep, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatal(err)
	}
	get(t, ep)
	c, err := e.cli.ContainerInspect(t.Context(), e.name(id))
	if err != nil {
		t.Fatal(err)
	}
	started, _ := time.Parse(time.RFC3339Nano, c.State.StartedAt)
	if !started.Before(t0) || c.Config.Labels[runtime.LabelPool] != tpl.Name {
		t.Errorf("got container started %v (request at %v) labels %v, want a pool container started before the request",
			started, t0, c.Config.Labels)
	}
	waitFor(t, "the pool to refill to 2", func() bool {
		return m.PoolSize(tpl.Name) == 2 && len(e.poolContainers(t, scope, tpl.Name)) == 2
	})

	m.Close()
	m2 := e.manager(t)
	ep2, err := m2.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := e.cli.ContainerInspect(t.Context(), e.name(id))
	if err != nil {
		t.Fatal(err)
	}
	if c2.ID != c.ID || ep2.Addr != ep.Addr {
		t.Errorf("got %s at %s after restart, want %s at %s", c2.ID, ep2.Addr, c.ID, ep.Addr)
	}
	if n := m2.PoolSize(tpl.Name); n != 2 {
		t.Errorf("got pool %d after restart, want the 2 running ones adopted", n)
	}
	list, err := m2.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var found int
	for _, s := range list {
		if s.ID == id {
			found++
		}
	}
	if found != 1 {
		t.Errorf("got %d listings of %s after restart, want 1", found, id)
	}
	if n := len(e.poolContainers(t, scope, tpl.Name)); n != 2 {
		t.Errorf("got %d pool containers after restart, want 2 (no extra fill)", n)
	}
}
