package sandboxmgr

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestTouchAndHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newFakeManager(t, Config{})
		if last, open := m.activity("a"); !last.IsZero() || open != 0 {
			t.Fatalf("got %v, %d for an unknown id, want zero", last, open)
		}
		m.Sandbox("a").Touch()
		t0 := time.Now()
		if last, _ := m.activity("a"); !last.Equal(t0) {
			t.Errorf("got last activity %v, want %v", last, t0)
		}
		time.Sleep(time.Minute)
		release := m.Sandbox("a").Hold()
		release2 := m.Sandbox("a").Hold()
		if _, open := m.activity("a"); open != 2 {
			t.Errorf("got %d open, want 2", open)
		}
		time.Sleep(time.Minute)
		release()
		release() // twice is harmless
		if last, open := m.activity("a"); open != 1 || !last.Equal(t0.Add(2*time.Minute)) {
			t.Errorf("got %v, %d open, want %v, 1", last, open, t0.Add(2*time.Minute))
		}
		release2()
		if _, open := m.activity("a"); open != 0 {
			t.Errorf("got %d open, want 0", open)
		}
	})
}

func BenchmarkEnsureCached(b *testing.B) {
	m := New(Config{}, newFake(), nil, nil)
	defer m.Close()
	m.observe("a", runtime.Instance{State: runtime.StateRunning, IP: "10.0.0.2"})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.Ensure(b.Context(), "a", nil); err != nil {
				b.Fatal(err)
			}
			m.Sandbox("a").Touch()
		}
	})
}

// activity reports when id last saw a request (zero if never, in this
// process) and how many long-lived connections it has open.
func (m *Manager) activity(id string) (last time.Time, open int) {
	sb := m.lookup(id)
	if sb == nil {
		return time.Time{}, 0
	}
	return sb.lastActive(), int(sb.holds.Load())
}
