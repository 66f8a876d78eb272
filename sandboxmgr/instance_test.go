package sandboxmgr

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// goneRecorder is a Listener that collects InstanceGone reports. Its callback takes the
// manager's lock (States), so a report made under that lock deadlocks the
// test instead of passing.
type goneRecorder struct {
	m   *Manager
	mu  sync.Mutex
	got []string
}

func (r *goneRecorder) BeforeStop(string) {}

func (r *goneRecorder) InstanceGone(inst string) {
	r.m.States() // takes m.mu: proves the call is not made under it
	r.mu.Lock()
	r.got = append(r.got, inst)
	r.mu.Unlock()
}

func (r *goneRecorder) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *goneRecorder) reset() {
	r.mu.Lock()
	r.got = nil
	r.mu.Unlock()
}

// goneWorld is a manager over a fake engine with sandbox "a" running and
// ready; it returns its endpoint.
func goneWorld(t *testing.T, cfg Config) (*Manager, *fakeEngine, *goneRecorder, *config.Template, Endpoint) {
	t.Helper()
	rec := &goneRecorder{}
	m, f := newFakeManager(t, cfg)
	rec.m = m
	m.SetListener(rec)
	tpl := appListener(t)
	ep, err := m.Ensure(t.Context(), "a", tpl)
	if err != nil {
		t.Fatal(err)
	}
	want := "id-" + ContainerName("a") + "@"
	if !strings.HasPrefix(ep.Instance, want) || len(ep.Instance) == len(want) {
		t.Fatalf("got instance %q, want %s<start time>", ep.Instance, want)
	}
	return m, f, rec, tpl, ep
}

// adoptedWorld is a manager started over a fake engine that already runs
// sandbox "a" (a container with labels), as after a gateway restart; it
// returns the adopted endpoint. The manager closes when t ends.
func adoptedWorld(t *testing.T, tpl *config.Template, labels map[string]string) (*Manager, *fakeEngine, *goneRecorder, Endpoint) {
	t.Helper()
	f := newFake()
	f.put(ContainerName("a"), runtime.StateRunning, labels)
	m := New(Config{Templates: func(string) *config.Template { return tpl }}, f, nil, nil)
	rec := &goneRecorder{m: m}
	m.SetListener(rec)
	t.Cleanup(func() { m.Close() })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ep, ok := cached(m, "a")
	if !ok {
		t.Fatal("not adopted")
	}
	return m, f, rec, ep
}

func wantGone(t *testing.T, rec *goneRecorder, inst string) {
	t.Helper()
	if got := rec.reported(); !slices.Contains(got, inst) {
		t.Errorf("got gone %q, want %q reported", got, inst)
	}
}

// Each way the manager learns that a container run is over reports the
// endpoint's instance, so the gateway can close its pooled connections.
func TestInstanceGoneTriggers(t *testing.T) {
	ev := func(action string) func(*testing.T, *Manager, *fakeEngine) {
		return func(_ *testing.T, m *Manager, _ *fakeEngine) {
			m.applyEvent(runtime.Event{Action: action, ID: "id-" + ContainerName("a"), Name: ContainerName("a")})
		}
	}
	for _, tc := range []struct {
		name string
		do   func(*testing.T, *Manager, *fakeEngine)
	}{
		{"die event", ev(runtime.EventDie)},
		{"stop event", ev(runtime.EventStop)},
		{"kill event", ev(runtime.EventKill)},
		{"oom event", ev(runtime.EventOOM)},
		{"pause event", ev(runtime.EventPause)},
		{"destroy event", ev(runtime.EventDestroy)},
		{"renamed away", func(_ *testing.T, m *Manager, _ *fakeEngine) {
			m.applyEvent(runtime.Event{Action: runtime.EventRename, ID: "id-" + ContainerName("a"), Name: "elsewhere", OldName: ContainerName("a")})
		}},
		{"another container renamed in (pool claim elsewhere)", func(_ *testing.T, m *Manager, _ *fakeEngine) {
			m.applyEvent(runtime.Event{Action: runtime.EventRename, ID: "other", Name: ContainerName("a"), OldName: "previewgate-pool-x-1"})
		}},
		{"Forget", func(_ *testing.T, m *Manager, _ *fakeEngine) {
			ep, _ := cached(m, "a")
			m.Sandbox("a").Forget(ep.Addr)
		}},
		{"Stop", func(t *testing.T, m *Manager, _ *fakeEngine) {
			if err := m.Stop(t.Context(), "a"); err != nil {
				t.Fatal(err)
			}
		}},
		{"Remove", func(t *testing.T, m *Manager, _ *fakeEngine) {
			if err := m.Remove(t.Context(), "a"); err != nil {
				t.Fatal(err)
			}
		}},
		{"Start finds it gone", func(t *testing.T, m *Manager, f *fakeEngine) {
			f.Remove(t.Context(), ContainerName("a"))
			if err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"Start finds another run", func(t *testing.T, m *Manager, f *fakeEngine) {
			f.restart(ContainerName("a"))
			if err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"resync finds another run", func(t *testing.T, m *Manager, f *fakeEngine) {
			f.restart(ContainerName("a"))
			if err := m.resync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"resync finds it stopped", func(t *testing.T, m *Manager, f *fakeEngine) {
			f.Sleep(t.Context(), ContainerName("a"), runtime.SleepStop)
			if err := m.resync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"resync finds another container", func(t *testing.T, m *Manager, f *fakeEngine) {
			f.Remove(t.Context(), ContainerName("a"))
			f.put(ContainerName("a"), runtime.StateRunning, map[string]string{runtime.LabelManaged: "true"})
			f.mu.Lock()
			f.ctrs[ContainerName("a")].ID = "new-id"
			f.mu.Unlock()
			if err := m.resync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, f, rec, _, ep := goneWorld(t, Config{})
			tc.do(t, m, f)
			if got := rec.reported(); len(got) == 0 || got[0] != ep.Instance {
				t.Errorf("got gone %q, want [%q]", got, ep.Instance)
			}
			if cached, ok := cached(m, "a"); ok && cached.Instance == ep.Instance {
				t.Errorf("got %q still cached, want it dropped", ep.Instance)
			}
		})
	}
}

// Nothing that leaves the run alone reports it.
func TestInstanceNotGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(*testing.T, *Manager, *fakeEngine)
	}{
		{"start event", func(_ *testing.T, m *Manager, _ *fakeEngine) {
			m.applyEvent(runtime.Event{Action: runtime.EventStart, ID: "id-" + ContainerName("a"), Name: ContainerName("a")})
		}},
		{"destroy of an older container", func(_ *testing.T, m *Manager, _ *fakeEngine) {
			m.applyEvent(runtime.Event{Action: runtime.EventDestroy, ID: "old", Name: ContainerName("a")})
		}},
		{"another sandbox dies", func(_ *testing.T, m *Manager, _ *fakeEngine) {
			m.applyEvent(runtime.Event{Action: runtime.EventDie, ID: "b", Name: ContainerName("b")})
		}},
		{"Forget of another address", func(_ *testing.T, m *Manager, _ *fakeEngine) {
			m.Sandbox("a").Forget("10.0.0.1:1")
		}},
		{"resync, unchanged", func(t *testing.T, m *Manager, _ *fakeEngine) {
			if err := m.resync(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"Start, unchanged", func(t *testing.T, m *Manager, _ *fakeEngine) {
			if err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, f, rec, _, ep := goneWorld(t, Config{})
			tc.do(t, m, f)
			if got := rec.reported(); len(got) != 0 {
				t.Errorf("got gone %q, want none", got)
			}
			if cached, ok := cached(m, "a"); !ok || cached.Instance != ep.Instance {
				t.Errorf("got cached %+v, %v, want %q", cached, ok, ep.Instance)
			}
		})
	}
}

// A restart behind the manager's back (same container ID, same address) is
// a new instance; the wake that finds it reports the old one even when no
// event did.
func TestInstanceRestartIsNew(t *testing.T) {
	m, f, rec, tpl, ep := goneWorld(t, Config{})
	m.Sandbox("a").Forget(ep.Addr) // the gateway's dial failed
	rec.reset()                    // as if that report had been lost: the wake must report again
	f.restart(ContainerName("a"))
	ep2, err := m.Ensure(t.Context(), "a", tpl)
	if err != nil {
		t.Fatal(err)
	}
	if ep2.Instance == ep.Instance || ep2.Addr != ep.Addr {
		t.Errorf("got %+v after a restart, want the same address as %+v under a new instance", ep2, ep)
	}
	wantGone(t, rec, ep.Instance)
	if got := rec.reported(); slices.Contains(got, ep2.Instance) {
		t.Errorf("got gone %q, want the new instance %q not reported", got, ep2.Instance)
	}
	if c, _ := cached(m, "a"); c.Instance != ep2.Instance {
		t.Errorf("got cached instance %q, want %q", c.Instance, ep2.Instance)
	}
}

// The gateway may Forget first and the die event arrive later: the event
// still names the instance (a report may repeat, never go missing).
func TestInstanceDieAfterForget(t *testing.T) {
	m, _, rec, _, ep := goneWorld(t, Config{})
	m.Sandbox("a").Forget(ep.Addr)
	rec.reset()
	m.applyEvent(runtime.Event{Action: runtime.EventDie, ID: "id-" + ContainerName("a"), Name: ContainerName("a")})
	if got := rec.reported(); !slices.Equal(got, []string{ep.Instance}) {
		t.Errorf("got gone %q, want [%q]", got, ep.Instance)
	}
}

// An unpause does not start a new run: the sandbox keeps its instance.
func TestInstanceUnpauseKeepsInstance(t *testing.T) {
	m, f, rec, tpl, ep := goneWorld(t, Config{})
	f.setState(ContainerName("a"), runtime.StateRunning, runtime.StatePaused)
	m.applyEvent(runtime.Event{Action: runtime.EventPause, ID: "id-" + ContainerName("a"), Name: ContainerName("a")})
	wantGone(t, rec, ep.Instance)
	ep2, err := m.Ensure(t.Context(), "a", tpl)
	if err != nil {
		t.Fatal(err)
	}
	if ep2.Instance != ep.Instance {
		t.Errorf("got instance %q after unpause, want %q", ep2.Instance, ep.Instance)
	}
}

// Endpoints adopted at Start carry their instance too.
func TestInstanceAdoptedAtStart(t *testing.T) {
	f := newFake()
	f.put(ContainerName("a"), runtime.StateRunning, map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: "a"})
	m := New(Config{}, f, nil, nil)
	defer m.Close()
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, _ := f.Lookup(t.Context(), ContainerName("a"))
	ep, ok := cached(m, "a")
	if !ok || ep.Instance != instanceOf(c) || ep.Instance == "" {
		t.Errorf("got %+v, %v, want instance %q", ep, ok, instanceOf(c))
	}
}

// The reaper reports what it stops or pauses.
func TestInstanceGoneReaper(t *testing.T) {
	for _, action := range []string{config.IdleStop, config.IdlePause} {
		t.Run(action, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tpl := &config.Template{Name: "t", IdleTimeout: dur(2 * time.Second), IdleAction: action}
				_, _, rec, ep := adoptedWorld(t, tpl, map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: "a", runtime.LabelTemplate: "t"})
				time.Sleep(4 * time.Second)
				synctest.Wait()
				if got := rec.reported(); !slices.Equal(got, []string{ep.Instance}) {
					t.Errorf("got gone %q, want [%q]", got, ep.Instance)
				}
			})
		})
	}
}
