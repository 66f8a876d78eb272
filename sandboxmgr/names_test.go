package sandboxmgr

import (
	"testing"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestLegacyNameAdopted: a sandbox an earlier version made under
// previewgate-<id> (runtime.LegacyName) is this scope's sandbox still:
// Start adopts it, a wake uses it, and nothing is created beside it (a
// gateway restart after an upgrade loses nothing).
func TestLegacyNameAdopted(t *testing.T) {
	m, f := newFakeManager(t, Config{Labels: map[string]string{"scope": "x"}})
	tpl := appListener(t)
	legacy := runtime.LegacyName("a")
	labels := runtime.Scoped(m.cfg.Labels)
	labels[runtime.LabelPort], labels[runtime.LabelTemplate] = itoa(tpl.Port), tpl.Name
	f.put(legacy, runtime.StateExited, labels)
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := m.Sandbox("a").Snapshot(); !s.Exists || s.Template != tpl.Name {
		t.Errorf("after Start: %+v, want the legacy-named sandbox adopted", s)
	}
	if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
		t.Fatal(err)
	}
	if n := f.creates.Load(); n != 0 || f.state(legacy) != runtime.StateRunning {
		t.Errorf("wake of a legacy-named sandbox: %d creates, its container %q, want it started, none made", n, f.state(legacy))
	}
	list, err := m.List(t.Context())
	if err != nil || len(list) != 1 || list[0].ID != "a" {
		t.Errorf("List: %+v %v, want sandbox a", list, err)
	}
	if err := m.Remove(t.Context(), "a"); err != nil || f.state(legacy) != "" {
		t.Errorf("Remove: %v, container %q, want it gone", err, f.state(legacy))
	}
}

// TestNamesOfScopesNeverCollide: two gateway scopes' sandboxes of one id
// are two instances under two names; another scope's sandbox under the
// legacy name (an earlier version of that gateway made it) blocks
// nothing and is left alone.
func TestNamesOfScopesNeverCollide(t *testing.T) {
	f := newFake()
	tpl := appListener(t)
	mine := New(Config{Labels: map[string]string{"scope": "x"}}, f, nil, nil)
	theirs := New(Config{Labels: map[string]string{"scope": "y"}}, f, nil, nil)
	t.Cleanup(func() { mine.Close(); theirs.Close() })
	if mine.name("demo") == theirs.name("demo") {
		t.Fatalf("two scopes name demo %q alike", mine.name("demo"))
	}
	f.put(runtime.LegacyName("demo"), runtime.StateRunning, runtime.Scoped(theirs.cfg.Labels))
	for _, m := range []*Manager{mine, theirs} {
		if _, err := m.Ensure(t.Context(), "demo", tpl); err != nil {
			t.Fatalf("scope %v: %v", m.cfg.Labels, err)
		}
	}
	if n := f.creates.Load(); n != 1 || f.state(mine.name("demo")) != runtime.StateRunning || f.state(runtime.LegacyName("demo")) != runtime.StateRunning {
		t.Errorf("%d creates, mine %q, theirs (legacy) %q: want mine made beside theirs, both running",
			n, f.state(mine.name("demo")), f.state(runtime.LegacyName("demo")))
	}
	if list, _ := mine.List(t.Context()); len(list) != 1 || list[0].Container != "id-"+mine.name("demo") {
		t.Errorf("mine lists %+v, want only its own", list)
	}
}
