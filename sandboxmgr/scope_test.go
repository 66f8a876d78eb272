package sandboxmgr

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A container under the name of a sandbox of this manager's scope
// (runtime.Name) without the manager's scope labels is someone else's: no
// call of the manager changes it, lists it or hands out its address (#13).
func TestForeignContainerIsLeftAlone(t *testing.T) {
	scoped := Config{Labels: map[string]string{"scope": "x"}, StaleCreate: -1}
	for _, tc := range []struct {
		name   string
		cfg    Config
		labels map[string]string
	}{
		{"managed but another gateway's scope", scoped, map[string]string{runtime.LabelManaged: "true", "scope": "y"}},
		{"managed, no scope label", scoped, map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: "a"}},
		{"scope label but not managed", scoped, map[string]string{"scope": "x"}},
		{"no labels, unscoped manager", Config{StaleCreate: -1}, nil},
	} {
		for _, state := range []string{runtime.StateRunning, runtime.StateExited, runtime.StatePaused, runtime.StateCreated} {
			t.Run(tc.name+"/"+state, func(t *testing.T) {
				t.Parallel()
				m, f := newFakeManager(t, tc.cfg)
				tpl := appListener(t)
				name := m.name("a")
				f.putForeign(name, state, tc.labels)
				before, _ := f.Lookup(t.Context(), name)
				if err := m.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				if _, err := m.Ensure(t.Context(), "a", tpl); !errors.Is(err, runtime.ErrForeign) {
					t.Errorf("Ensure: got %v, want runtime.ErrForeign", err)
				}
				if _, err := m.EnsureWith(t.Context(), "a", tpl, Options{NoWake: true}); !errors.Is(err, runtime.ErrForeign) {
					t.Errorf("Ensure NoWake: got %v, want runtime.ErrForeign", err)
				}
				if _, ok := cached(m, "a"); ok {
					t.Error("got a cached endpoint for a foreign container")
				}
				if err := m.Stop(t.Context(), "a"); !errors.Is(err, runtime.ErrForeign) {
					t.Errorf("Stop: got %v, want runtime.ErrForeign", err)
				}
				if err := m.Remove(t.Context(), "a"); !errors.Is(err, runtime.ErrForeign) {
					t.Errorf("Remove: got %v, want runtime.ErrForeign", err)
				}
				list, err := m.List(t.Context())
				if err != nil || len(list) != 0 {
					t.Errorf("List: got %+v, %v, want none", list, err)
				}
				after, err := f.Lookup(t.Context(), name)
				if err != nil || after.State != before.State || after.ID != before.ID {
					t.Errorf("got %+v, %v, want it untouched: %+v", after, err, before)
				}
				if n := f.starts.Load() + f.creates.Load(); n != 0 {
					t.Errorf("got %d starts and creates, want 0", n)
				}
			})
		}
	}
}

// The error names the container and what it lacks, so an operator sees why.
func TestForeignContainerError(t *testing.T) {
	m, f := newFakeManager(t, Config{Labels: map[string]string{"scope": "x"}})
	f.putForeign(m.name("a"), runtime.StateRunning, map[string]string{"scope": "x"})
	_, err := m.Ensure(t.Context(), "a", appListener(t))
	want := "sandbox a: container " + m.name("a") + ": container exists but is not managed by this gateway: it was not made by previewgate (no previewgate.managed=true label); remove or rename it if nobody needs it"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// A sandbox's container replaced under its name by a foreign one: the
// cached endpoint goes (its instance reported), and the reaper leaves the
// foreign container running.
func TestForeignContainerTakesTheName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tpl := &config.Template{Name: "t", IdleTimeout: dur(2 * time.Second)}
		m, f, rec, ep := adoptedWorld(t, tpl, map[string]string{runtime.LabelSandbox: "a", runtime.LabelTemplate: "t"})
		name := ContainerName("a")
		f.Remove(context.Background(), name)
		f.putForeign(name, runtime.StateRunning, map[string]string{runtime.LabelTemplate: "t"})
		f.mu.Lock()
		f.ctrs[name].ID = "foreign"
		f.mu.Unlock()
		time.Sleep(5 * time.Second) // past idle_timeout: the reaper looks
		synctest.Wait()
		if got := f.state(name); got != runtime.StateRunning {
			t.Errorf("got foreign container %s, want running", got)
		}
		if _, ok := cached(m, "a"); ok {
			t.Error("got the old endpoint still cached")
		}
		wantGone(t, rec, ep.Instance)
	})
}

// A pool entry whose container vanished and whose name a foreign container
// took is not claimed: the claim renames by ID.
func TestPoolClaimByID(t *testing.T) {
	m, f := newFakeManager(t, Config{})
	tpl := appListener(t)
	tpl.Pool = 1
	f.putForeign("previewgate-pool-fake-1", runtime.StateRunning, nil)
	m.mu.Lock()
	m.pool.ready["fake"] = []poolCtr{{id: "id-gone", name: "previewgate-pool-fake-1"}}
	m.mu.Unlock()
	if _, err := m.claim(t.Context(), "a", tpl); !errors.Is(err, errNoPool) {
		t.Errorf("got %v, want errNoPool", err)
	}
	if got := f.state("previewgate-pool-fake-1"); got != runtime.StateRunning {
		t.Errorf("got foreign pool-named container %q, want it left running under its name", got)
	}
}

// A container that carries only this gateway's own scope label was not
// made by previewgate, and a managed one of the same scope name with other
// labels is not "the gateway scope X" this gateway should become: neither
// names a scope to open it through, so the preview's page says what is
// true (the gateway's message keys off Scope).
func TestForeignErrorOfOwnScopeLabel(t *testing.T) {
	own := map[string]string{runtime.LabelInstance: "pg-a"}
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		managed bool
		scope   string
		why     string
	}{
		{"only the gateway's label", map[string]string{runtime.LabelInstance: "pg-a"}, false, "", "not made by previewgate"},
		{"same scope, other labels", map[string]string{runtime.LabelManaged: "true", runtime.LabelInstance: "pg-a", runtime.LabelScope: "sother"}, true, "",
			`another gateway of the scope "pg-a" with other labels`},
		{"another scope", map[string]string{runtime.LabelManaged: "true", runtime.LabelInstance: "pg-b", runtime.LabelScope: "sother"}, true, "pg-b", `the gateway scope "pg-b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, f := newFakeManager(t, Config{Labels: own})
			f.putForeign(m.name("a"), runtime.StateRunning, tc.labels)
			_, err := m.Ensure(t.Context(), "a", appListener(t))
			var fe *ForeignError
			if !errors.As(err, &fe) || fe.Managed != tc.managed || fe.Scope != tc.scope || !strings.Contains(fe.Why, tc.why) {
				t.Errorf("got %#v (%v), want managed %t, scope %q, why %q", fe, err, tc.managed, tc.scope, tc.why)
			}
		})
	}
}
