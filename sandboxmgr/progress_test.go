package sandboxmgr

import (
	"context"
	"reflect"
	"testing"
	"time"
)

func waitPhase(t *testing.T, m *Manager, id, want string) Progress {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := m.Progress(id)
		if p.Phase == want {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("got phase %q, want %q", p.Phase, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestWakeProgress(t *testing.T) {
	m, f := newFakeManager(t, Config{ReapEvery: -1})
	tpl := appListener(t)
	gate := make(chan struct{})
	f.createHook = func(context.Context, ctrSpec) error { <-gate; return nil }
	m.Wake("a", tpl, Options{}) // returns at once
	waitPhase(t, m, "a", PhaseCreating)
	close(gate)
	waitPhase(t, m, "a", PhaseReady)
	if _, ok := m.Cached("a"); !ok {
		t.Error("not cached after a ready wake")
	}
}

func TestWakeProgressFailed(t *testing.T) {
	m, _ := newFakeManager(t, Config{ReapEvery: -1})
	tpl := appListener(t)
	tpl.Image = "" // cannot be created
	m.Wake("a", tpl, Options{})
	p := waitPhase(t, m, "a", PhaseFailed)
	if p.Err == nil {
		t.Error("failed without an error")
	}
	if got := m.Progress("never"); !reflect.DeepEqual(got, Progress{}) {
		t.Errorf("got %+v for an unknown id, want zero", got)
	}
}
