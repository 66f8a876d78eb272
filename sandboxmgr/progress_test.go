package sandboxmgr

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func waitPhase(t *testing.T, m *Manager, id, want string) Progress {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := progressOf(m, id)
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
	f.createHook = func(context.Context, runtime.Spec) error { <-gate; return nil }
	m.Sandbox("a").Wake(tpl, Options{}) // returns at once
	waitPhase(t, m, "a", PhaseCreating)
	close(gate)
	waitPhase(t, m, "a", PhaseReady)
	if _, ok := cached(m, "a"); !ok {
		t.Error("not cached after a ready wake")
	}
}

func TestWakeProgressFailed(t *testing.T) {
	m, _ := newFakeManager(t, Config{ReapEvery: -1})
	tpl := appListener(t)
	tpl.Image = "" // cannot be created
	m.Sandbox("a").Wake(tpl, Options{})
	p := waitPhase(t, m, "a", PhaseFailed)
	if p.Err == nil {
		t.Error("failed without an error")
	}
	if got := progressOf(m, "never"); !reflect.DeepEqual(got, Progress{}) {
		t.Errorf("got %+v for an unknown id, want zero", got)
	}
}

// TestSpans: a request's wait splits into the phases its marks put it in,
// the spans add up to the wait, time before the first mark is queued, and
// the moment after the port probe counts as app.
func TestSpans(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1e9, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	marks := []PhaseMark{{PhaseQueued, at(0)}, {PhaseCreating, at(100)}, {PhaseStarting, at(300)},
		{PhaseWaitingPort, at(600)}, {PhaseReady, at(1000)}}
	type span = PhaseSpan
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name     string
		marks    []PhaseMark
		from, to time.Time
		want     []span
	}{
		{"the whole wake", marks, at(0), at(1010), []span{{"queued", ms(100)}, {"create", ms(200)}, {"start", ms(300)}, {"app", ms(410)}}},
		{"came during start", marks, at(400), at(1000), []span{{"start", ms(200)}, {"app", ms(400)}}},
		{"came before the wake", marks, t0.Add(-50 * time.Millisecond), at(200), []span{{"queued", ms(150)}, {"create", ms(100)}}},
		{"no marks", nil, at(0), at(30), []span{{"queued", ms(30)}}},
		{"nothing waited", marks, at(500), at(500), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Spans(tc.marks, tc.from, tc.to)
			var sum time.Duration
			for _, s := range got {
				sum += s.D
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || sum != tc.to.Sub(tc.from) {
				t.Errorf("got %v (sum %v), want %v (sum %v)", got, sum, tc.want, tc.to.Sub(tc.from))
			}
		})
	}
}
