package sandboxmgr

import (
	"errors"
	"testing"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestSubjectMaxRunning: a subject runs at most SubjectMaxRunning
// sandboxes, counted from the runtime's list, so a second replica on the
// same engine sees the first one's (#24, 9). A sandbox it created carries
// the subject's digest; waking a stopped one counts like a create; other
// subjects and stopped sandboxes do not count.
func TestSubjectMaxRunning(t *testing.T) {
	t.Parallel()
	m, f := newFakeManager(t, Config{})
	replica := New(Config{}, f, nil, nil) // another gateway on the same engine
	t.Cleanup(func() { replica.Close() })
	tpl := appListener(t)
	opts := func(sub string) Options { return Options{Subject: sub, SubjectMaxRunning: 2} }

	for _, id := range []string{"a", "b"} {
		if _, err := m.EnsureWith(t.Context(), id, tpl, opts("alice")); err != nil {
			t.Fatalf("alice's %s: %v", id, err)
		}
	}
	if got := f.ctrs[ContainerName("a")].Labels[runtime.LabelSubject]; got != SubjectKey("alice") || got == "alice" {
		t.Errorf("got label %s=%q, want alice's digest", runtime.LabelSubject, got)
	}
	_, err := replica.EnsureWith(t.Context(), "c", tpl, opts("alice"))
	var sl *SubjectLimitError
	if !errors.As(err, &sl) || !errors.Is(err, ErrSubjectLimit) || sl.Limit != 2 || sl.Running != 2 {
		t.Fatalf("alice's third, on the other replica: got %v, want a SubjectLimitError 2 of 2", err)
	}
	if _, ok := f.ctrs[ContainerName("c")]; ok {
		t.Error("the refused sandbox was created")
	}
	if _, err := replica.EnsureWith(t.Context(), "d", tpl, opts("bob")); err != nil {
		t.Errorf("bob's first: got %v, want it created", err)
	}
	// A running sandbox of hers is served as before, without a count.
	if _, err := m.EnsureWith(t.Context(), "a", tpl, opts("alice")); err != nil {
		t.Errorf("alice's running a: got %v, want it served", err)
	}
	if err := f.Sleep(t.Context(), "id-"+ContainerName("b"), runtime.SleepStop); err != nil {
		t.Fatal(err)
	}
	m.Sandbox("b").Forget("")
	if _, err := replica.EnsureWith(t.Context(), "c", tpl, opts("alice")); err != nil {
		t.Fatalf("alice's c after b stopped: got %v, want it created", err)
	}
	// Waking the stopped b would make three.
	if _, err := m.EnsureWith(t.Context(), "b", tpl, opts("alice")); !errors.As(err, &sl) {
		t.Errorf("waking alice's stopped b: got %v, want a SubjectLimitError", err)
	}
}
