package sandboxmgr

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// reapWorld is a manager over a fake engine holding one running sandbox "a"
// of template "t", adopted at Start. Run it inside a synctest bubble.
func reapWorld(t *testing.T, tpl config.Template, beforeStop func(string)) (*Manager, *fakeEngine) {
	t.Helper()
	tpl.Name = "t"
	f := newFake()
	f.put(ContainerName("a"), runtime.StateRunning, map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: "a", runtime.LabelTemplate: "t"})
	m := New(Config{
		Templates: func(name string) *config.Template { return map[string]*config.Template{"t": &tpl}[name] },
	}, f, nil, nil)
	m.SetListener(stopListener(beforeStop))
	t.Cleanup(func() { m.Close() })
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m, f
}

// stopListener is a Listener that reports BeforeStop only.
type stopListener func(id string)

func (f stopListener) BeforeStop(id string) { f(id) }
func (stopListener) InstanceGone(string)    {}

func dur(d time.Duration) config.Duration { return config.Duration(d) }

func TestReaper(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tpl    config.Template
		script func(t *testing.T, m *Manager, f *fakeEngine, stops func() []string)
	}{
		{"idle running is stopped", config.Template{IdleTimeout: dur(2 * time.Second)}, func(t *testing.T, m *Manager, f *fakeEngine, _ func() []string) {
			m.Sandbox("a").Touch()
			time.Sleep(1500 * time.Millisecond)
			m.Sandbox("a").Touch() // activity resets the clock
			time.Sleep(1500 * time.Millisecond)
			wantState(t, f, runtime.StateRunning)
			time.Sleep(1500 * time.Millisecond)
			wantState(t, f, runtime.StateExited)
			if _, ok := cached(m, "a"); ok {
				t.Errorf("stopped sandbox still cached")
			}
		}},
		{"idle pause", config.Template{IdleTimeout: dur(2 * time.Second), IdleAction: config.IdlePause}, func(t *testing.T, m *Manager, f *fakeEngine, _ func() []string) {
			m.Sandbox("a").Touch()
			time.Sleep(3500 * time.Millisecond)
			wantState(t, f, runtime.StatePaused)
		}},
		{"open socket keeps it until max_socket_idle", config.Template{IdleTimeout: dur(2 * time.Second), MaxSocketIdle: dur(time.Minute)},
			func(t *testing.T, m *Manager, f *fakeEngine, stops func() []string) {
				release := m.Sandbox("a").Hold()
				defer release()
				time.Sleep(50 * time.Second)
				wantState(t, f, runtime.StateRunning)
				m.Sandbox("a").Touch() // an HTTP request resets the socket bound too
				time.Sleep(50 * time.Second)
				wantState(t, f, runtime.StateRunning)
				if len(stops()) != 0 {
					t.Errorf("got BeforeStop %v before max_socket_idle", stops())
				}
				time.Sleep(15 * time.Second)
				wantState(t, f, runtime.StateExited)
				if len(stops()) != 1 || (stops())[0] != "a" {
					t.Errorf("got BeforeStop calls %v, want [a]", stops())
				}
			}},
		{"released socket then idle", config.Template{IdleTimeout: dur(2 * time.Second)}, func(t *testing.T, m *Manager, f *fakeEngine, stops func() []string) {
			release := m.Sandbox("a").Hold()
			time.Sleep(10 * time.Second)
			wantState(t, f, runtime.StateRunning)
			release()
			time.Sleep(3500 * time.Millisecond)
			wantState(t, f, runtime.StateExited)
			if len(stops()) != 0 {
				t.Errorf("got BeforeStop %v for a plain idle stop", stops())
			}
		}},
		{"stopped is removed after remove_after", config.Template{IdleTimeout: dur(2 * time.Second), RemoveAfter: dur(time.Hour)},
			func(t *testing.T, m *Manager, f *fakeEngine, _ func() []string) {
				time.Sleep(3500 * time.Millisecond)
				wantState(t, f, runtime.StateExited)
				time.Sleep(59 * time.Minute)
				wantState(t, f, runtime.StateExited)
				time.Sleep(2 * time.Minute)
				wantState(t, f, "")
				if _, open := m.activity("a"); open != 0 {
					t.Errorf("removed sandbox still has holds")
				}
			}},
		{"no activity since start counts from start", config.Template{IdleTimeout: dur(10 * time.Second)}, func(t *testing.T, m *Manager, f *fakeEngine, _ func() []string) {
			time.Sleep(9 * time.Second)
			wantState(t, f, runtime.StateRunning)
			time.Sleep(2 * time.Second)
			wantState(t, f, runtime.StateExited)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var stops []string
				m, f := reapWorld(t, tc.tpl, func(id string) { mu.Lock(); stops = append(stops, id); mu.Unlock() })
				tc.script(t, m, f, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), stops...) })
			})
		})
	}
}

func wantState(t *testing.T, f *fakeEngine, want string) {
	t.Helper()
	synctest.Wait()
	if got := f.state(ContainerName("a")); got != want {
		t.Fatalf("at %v: got state %q, want %q", time.Now().Format("15:04:05.000"), got, want)
	}
}

// A request arriving after an idle stop wakes the sandbox again; a wake in
// progress is never reaped.
func TestReaperThenWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := reapWorld(t, config.Template{IdleTimeout: dur(2 * time.Second)}, nil)
		time.Sleep(3500 * time.Millisecond)
		wantState(t, f, runtime.StateExited)
		// Wake without a network probe: mark it started the way Ensure does.
		sb := m.lookup("a")
		sb.op.Lock()
		sb.waking.Add(1)
		if err := f.Start(t.Context(), ContainerName("a")); err != nil {
			t.Fatal(err)
		}
		m.markRunning(sb)
		time.Sleep(10 * time.Second) // a slow wake, far past idle_timeout
		wantState(t, f, runtime.StateRunning)
		sb.waking.Add(-1)
		sb.op.Unlock()
		m.Sandbox("a").Touch()
		time.Sleep(1500 * time.Millisecond)
		wantState(t, f, runtime.StateRunning)
	})
}
