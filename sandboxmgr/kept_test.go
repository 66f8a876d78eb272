package sandboxmgr

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A kept workspace (Kubernetes: a claim without its pod) is a stopped
// sandbox: the reaper removes it after remove_after, counted from the stop
// the runtime recorded, so a gateway restart does not push it back; with
// no recorded stop it counts from the manager's start, as a stopped Docker
// container does.
func TestReaperKeptWorkspace(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stoppedAgo  time.Duration // 0: not recorded
		keptFor     time.Duration // still there after this long
		removedWith time.Duration // gone after this long
	}{
		{"recorded stop", 50 * time.Minute, 9 * time.Minute, 11 * time.Minute},
		{"recorded long ago", 3 * time.Hour, 0, 2 * time.Second},
		{"not recorded", 0, 59 * time.Minute, 61 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tpl := &config.Template{Name: "t", RemoveAfter: dur(time.Hour)}
				f := newFake()
				var stopped time.Time
				if tc.stoppedAgo > 0 {
					stopped = time.Now().Add(-tc.stoppedAgo)
				}
				f.putKept(ContainerName("a"), stopped, map[string]string{runtime.LabelSandbox: "a", runtime.LabelTemplate: "t"})
				m := New(Config{Templates: func(string) *config.Template { return tpl }}, f, nil, nil)
				t.Cleanup(func() { m.Close() })
				if err := m.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				time.Sleep(tc.keptFor)
				synctest.Wait()
				if tc.keptFor > 0 && f.state(ContainerName("a")) != runtime.StateExited {
					t.Fatalf("after %v: got state %q, want the kept workspace", tc.keptFor, f.state(ContainerName("a")))
				}
				time.Sleep(tc.removedWith - tc.keptFor)
				synctest.Wait()
				if got := f.state(ContainerName("a")); got != "" {
					t.Errorf("after %v: got state %q, want it removed", tc.removedWith, got)
				}
			})
		})
	}
}

// Waking a kept workspace makes a container on it: not charged as a new
// sandbox (OnCreate), never from the pool, and from the template it was
// made from when the caller names none.
func TestEnsureKeptWorkspace(t *testing.T) {
	t.Parallel()
	tpl := appListener(t)
	tpl.Pool = 1
	m, f := newFakeManager(t, Config{Templates: func(name string) *config.Template {
		return map[string]*config.Template{"fake": tpl}[name]
	}})
	f.putKept(ContainerName("a"), time.Now(), map[string]string{runtime.LabelSandbox: "a", runtime.LabelTemplate: "fake", runtime.LabelPort: itoa(tpl.Port)})
	charged := 0
	if _, err := m.EnsureWith(t.Context(), "a", nil, Options{OnCreate: func() error { charged++; return nil }}); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if got := f.state(ContainerName("a")); got != runtime.StateRunning {
		t.Errorf("got state %q, want running", got)
	}
	if got := f.creates.Load(); got != 1 {
		t.Errorf("got %d creates, want 1", got)
	}
	if charged != 0 {
		t.Errorf("got %d OnCreate calls for a kept workspace, want 0", charged)
	}
	if n := m.PoolSize("fake"); n != 0 {
		t.Errorf("got pool size %d, want 0", n)
	}
}

// The informer's report of a workspace pod's deletion leaves the sandbox
// stopped (for the reaper), not unknown.
func TestEventKept(t *testing.T) {
	t.Parallel()
	m, _ := newFakeManager(t, Config{})
	m.observe("a", runtime.Instance{ID: "pod/1", Name: ContainerName("a"), State: runtime.StateRunning, IP: "127.0.0.1", StartedAt: time.Now()})
	if _, ok := cached(m, "a"); !ok {
		t.Fatal("running sandbox not cached")
	}
	m.applyEvent(runtime.Event{Action: runtime.EventKept, ID: "pod/other", Name: ContainerName("a")})
	if got := m.States()[runtime.StateRunning]; got != 1 {
		t.Errorf("another pod's deletion changed the state: got %v", m.States())
	}
	m.applyEvent(runtime.Event{Action: runtime.EventKept, ID: "pod/1", Name: ContainerName("a")})
	if got := m.States()[runtime.StateExited]; got != 1 {
		t.Errorf("got states %v, want one exited", m.States())
	}
	if _, ok := cached(m, "a"); ok {
		t.Error("stopped sandbox still cached")
	}
}
