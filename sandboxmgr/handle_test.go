package sandboxmgr

import (
	"testing"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestHandle: a handle reads one snapshot of what the manager knows (no
// runtime call) and acts on the sandbox's record; a sandbox it does not
// know gets no record until its handle acts; a handle taken before a
// Remove acts on the id's record of now.
func TestHandle(t *testing.T) {
	m, f := newFakeManager(t, Config{})
	tpl := appListener(t)

	h := m.Sandbox("a")
	if s := h.Snapshot(); s.Exists || s.Ready || s.Template != "" || s.Progress.Phase != "" || !s.Fresh {
		t.Errorf("unknown sandbox: snapshot %+v, want nothing known (and no records: fresh)", s)
	}
	if m.lookup("a") != nil {
		t.Fatal("a snapshot of an unknown sandbox made a record")
	}
	lookups := f.inspect.Load()
	ep, err := h.Ensure(t.Context(), tpl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Sandbox("a").Snapshot()
	if !s.Exists || s.Template != "fake" || !s.Ready || s.Endpoint != ep || s.Progress.Phase != PhaseReady {
		t.Errorf("after Ensure: snapshot %+v, want it known, ready at %+v", s, ep)
	}
	if last, _ := m.activity("a"); last.IsZero() {
		t.Error("Ensure through a handle recorded no activity")
	}
	if f.inspect.Load() == lookups {
		t.Error("the first Ensure asked the runtime nothing")
	}
	lookups = f.inspect.Load()
	if _, err := m.Sandbox("a").Ensure(t.Context(), tpl, Options{}); err != nil || f.inspect.Load() != lookups {
		t.Errorf("a warm Ensure: %v, %d runtime lookups, want none", err, f.inspect.Load()-lookups)
	}
	if n := testing.AllocsPerRun(100, func() { _ = m.Sandbox("a").Snapshot() }); n != 0 {
		t.Errorf("a warm snapshot allocates %v times, want 0", n)
	}

	old := m.Sandbox("a")
	if err := m.Remove(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sandbox("a").Ensure(t.Context(), tpl, Options{}); err != nil {
		t.Fatal(err)
	}
	release := old.Hold()
	if _, open := m.activity("a"); open != 1 {
		t.Errorf("Hold through a handle taken before a Remove: %d open on the record of now, want 1", open)
	}
	release()
	old.Forget(ep.Addr) // the old run's address: the new run stays cached
	if !m.Sandbox("a").Snapshot().Ready {
		t.Error("Forget through an old handle dropped the new run")
	}
	if f.state(ContainerName("a")) != runtime.StateRunning {
		t.Error("the sandbox is not running")
	}
}
