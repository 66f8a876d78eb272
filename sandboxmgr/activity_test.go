package sandboxmgr

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestTouchAndHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newFakeManager(t, Config{})
		if last, open := m.Activity("a"); !last.IsZero() || open != 0 {
			t.Fatalf("got %v, %d for an unknown id, want zero", last, open)
		}
		m.Touch("a")
		t0 := time.Now()
		if last, _ := m.Activity("a"); !last.Equal(t0) {
			t.Errorf("got last activity %v, want %v", last, t0)
		}
		time.Sleep(time.Minute)
		release := m.Hold("a")
		release2 := m.Hold("a")
		if _, open := m.Activity("a"); open != 2 {
			t.Errorf("got %d open, want 2", open)
		}
		time.Sleep(time.Minute)
		release()
		release() // twice is harmless
		if last, open := m.Activity("a"); open != 1 || !last.Equal(t0.Add(2*time.Minute)) {
			t.Errorf("got %v, %d open, want %v, 1", last, open, t0.Add(2*time.Minute))
		}
		release2()
		if _, open := m.Activity("a"); open != 0 {
			t.Errorf("got %d open, want 0", open)
		}
	})
}

func BenchmarkEnsureCached(b *testing.B) {
	m := newManager(Config{}, newFake(), nil, nil)
	defer m.Close()
	m.observe("a", ctrInfo{State: stateRunning, IP: "10.0.0.2"})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.Ensure(b.Context(), "a", nil); err != nil {
				b.Fatal(err)
			}
			m.Touch("a")
		}
	})
}
