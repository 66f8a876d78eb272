package sandboxmgr_test

import (
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
)

// waitState polls Docker until id's container is in state want.
func (e *env) waitState(t *testing.T, id, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := e.cli.ContainerInspect(t.Context(), e.name(id))
		if err != nil {
			t.Fatal(err)
		}
		if c.State.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("got state %q after %v, want %q", c.State.Status, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With idle_timeout 2s a sandbox is stopped shortly after its last request,
// but not while a long-lived connection is held; Ensure wakes it again.
func TestDockerIdleReaper(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tpl := testTemplate(t, nil)
	tpl.IdleTimeout = config.Duration(2 * time.Second)
	e.cfg.ReapEvery = 200 * time.Millisecond
	e.cfg.Templates = func(name string) *config.Template {
		if name == tpl.Name {
			return tpl
		}
		return nil
	}
	m := e.manager(t)
	id := newID()
	if _, err := m.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatal(err)
	}
	m.Sandbox(id).Touch()
	release := m.Sandbox(id).Hold()
	time.Sleep(3 * time.Second) // past idle_timeout, with the socket open
	e.waitState(t, id, "running", 0)
	release()
	e.waitState(t, id, "exited", 20*time.Second)
	if _, ok := m.Cached(id); ok {
		t.Error("stopped sandbox still cached")
	}
	ep, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure after the reaper: %v", err)
	}
	get(t, ep)
	if n := len(e.containers(t, id)); n != 1 {
		t.Errorf("got %d containers, want 1", n)
	}
}
