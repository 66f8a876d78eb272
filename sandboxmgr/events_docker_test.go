package sandboxmgr_test

import (
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/mgrtest"
)

// waitUncached polls until m no longer has id's endpoint cached: the events
// stream reported the outside change.
func waitUncached(t *testing.T, m *mgrtest.Manager, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := m.Cached(id); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still cached 10s after the change: the event was not noticed", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Changes made outside the manager arrive through the events stream; the
// next Ensure wakes the sandbox without the caller having to Forget.
func TestDockerEventsOutsideChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, e *env, name string) error
	}{
		{"killed", func(t *testing.T, e *env, name string) error { return e.cli.ContainerKill(t.Context(), name, "KILL") }},
		{"paused", func(t *testing.T, e *env, name string) error { return e.cli.ContainerPause(t.Context(), name) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			m := e.manager(t)
			id := newID()
			tpl := testTemplate(t, nil)
			if _, err := m.Ensure(t.Context(), id, tpl); err != nil {
				t.Fatalf("first Ensure: %v", err)
			}
			if _, ok := m.Cached(id); !ok {
				t.Fatal("not cached after Ensure")
			}
			if err := tc.change(t, e, e.name(id)); err != nil {
				t.Fatal(err)
			}
			waitUncached(t, m, id)
			ep, err := m.Ensure(t.Context(), id, tpl)
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
