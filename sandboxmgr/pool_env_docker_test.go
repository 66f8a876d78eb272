package sandboxmgr_test

import (
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestDockerPoolKeepsRequestEnv (hostile5): PUT /admin/sandboxes/{id}
// with env (the template's allow_env) hands the manager a copy of the
// template with that env. A warm pool container was made with the
// template's own env, and Docker cannot change a container's env: a claim
// would answer with a sandbox that silently lacks what the backend set for
// this user (say READ_ONLY=1 for a viewer). Such a create skips the pool;
// one with the template's own env still claims from it.
func TestDockerPoolKeepsRequestEnv(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tpl := testTemplate(t, map[string]string{"GREETING": "template"})
	tpl.Pool = 1
	tpl.AllowEnv = []string{"GREETING"}
	e.cfg.ListTemplates = func() []*config.Template { return []*config.Template{tpl} }
	e.cfg.Templates = func(string) *config.Template { return tpl }
	e.cfg.PoolEvery = 100 * time.Millisecond
	m := e.manager(t)
	waitFor(t, "a full pool", func() bool { return m.PoolSize(tpl.Name) == 1 })

	mine := *tpl
	mine.Env = maps.Clone(tpl.Env)
	mine.Env["GREETING"] = "request"
	id := newID()
	if _, err := m.EnsureWith(t.Context(), id, &mine, sandboxmgr.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := e.cli.ContainerInspect(t.Context(), e.name(id))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Config.Env, "GREETING=request") {
		t.Errorf("sandbox made with env GREETING=request runs with %v (pool label %q): the request's env was dropped",
			c.Config.Env, c.Config.Labels[runtime.LabelPool])
	}

	waitFor(t, "a full pool", func() bool { return m.PoolSize(tpl.Name) == 1 })
	id2 := newID()
	if _, err := m.EnsureWith(t.Context(), id2, tpl, sandboxmgr.Options{}); err != nil {
		t.Fatal(err)
	}
	c2, err := e.cli.ContainerInspect(t.Context(), e.name(id2))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Config.Labels[runtime.LabelPool] != tpl.Name {
		t.Errorf("a create with the template's own env did not claim from the pool (labels %v)", c2.Config.Labels)
	}
}

// TestDockerPoolFollowsReload (hostile5): a template's env, cmd, limits and
// capabilities apply to new sandboxes after a reload (docs/configuration.md),
// also to those claimed from the warm pool. Pool containers made before
// the reload carry the old ones (a rotated secret, a dropped capability)
// and Docker cannot change them: they are removed when met, as those of an
// older image are, never claimed.
func TestDockerPoolFollowsReload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := testTemplate(t, map[string]string{"SECRET": "leaked"})
	old.Pool = 1
	var cur atomic.Pointer[config.Template]
	cur.Store(old)
	e.cfg.ListTemplates = func() []*config.Template { return []*config.Template{cur.Load()} }
	e.cfg.Templates = func(string) *config.Template { return cur.Load() }
	e.cfg.PoolEvery = 100 * time.Millisecond
	m := e.manager(t)
	waitFor(t, "a full pool", func() bool { return m.PoolSize(old.Name) == 1 })

	reloaded := *old
	reloaded.Env = map[string]string{"SECRET": "rotated"}
	cur.Store(&reloaded)
	id := newID()
	if _, err := m.EnsureWith(t.Context(), id, &reloaded, sandboxmgr.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := e.cli.ContainerInspect(t.Context(), e.name(id))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Config.Env, "SECRET=rotated") {
		t.Errorf("a sandbox made after the reload runs with %v (pool label %q), want SECRET=rotated",
			c.Config.Env, c.Config.Labels[runtime.LabelPool])
	}

	// The pool refills with the reloaded template and is claimed again.
	waitFor(t, "a full pool", func() bool { return m.PoolSize(old.Name) == 1 })
	id2 := newID()
	if _, err := m.EnsureWith(t.Context(), id2, &reloaded, sandboxmgr.Options{}); err != nil {
		t.Fatal(err)
	}
	c2, err := e.cli.ContainerInspect(t.Context(), e.name(id2))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Config.Labels[runtime.LabelPool] != old.Name || !slices.Contains(c2.Config.Env, "SECRET=rotated") {
		t.Errorf("after the refill: labels %v env %v, want a pool container with SECRET=rotated", c2.Config.Labels, c2.Config.Env)
	}
}
