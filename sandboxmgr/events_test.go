package sandboxmgr

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestApplyEvent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ev        runtime.Event
		wantCache bool
		wantState string
	}{
		{"die drops", runtime.Event{Action: runtime.EventDie, ID: "id-" + ContainerName("a"), Name: ContainerName("a")}, false, runtime.StateExited},
		{"oom drops", runtime.Event{Action: runtime.EventOOM, ID: "id-" + ContainerName("a"), Name: ContainerName("a")}, false, runtime.StateExited},
		{"stop drops", runtime.Event{Action: runtime.EventStop, ID: "id-" + ContainerName("a"), Name: ContainerName("a")}, false, runtime.StateExited},
		{"kill drops", runtime.Event{Action: runtime.EventKill, ID: "id-" + ContainerName("a"), Name: ContainerName("a")}, false, runtime.StateRunning},
		{"pause drops", runtime.Event{Action: runtime.EventPause, ID: "id-" + ContainerName("a"), Name: ContainerName("a")}, false, runtime.StatePaused},
		{"destroy drops", runtime.Event{Action: runtime.EventDestroy, ID: "id-" + ContainerName("a"), Name: ContainerName("a")}, false, ""},
		{"destroy of another container keeps", runtime.Event{Action: runtime.EventDestroy, ID: "old", Name: ContainerName("a")}, true, runtime.StateRunning},
		{"renamed away drops", runtime.Event{Action: runtime.EventRename, ID: "id-" + ContainerName("a"), Name: "x", OldName: ContainerName("a")}, false, ""},
		{"start keeps", runtime.Event{Action: runtime.EventStart, ID: "id-" + ContainerName("a"), Name: ContainerName("a")}, true, runtime.StateRunning},
		{"other sandbox keeps", runtime.Event{Action: runtime.EventDie, ID: "b", Name: ContainerName("b")}, true, runtime.StateRunning},
		{"pool container ignored", runtime.Event{Action: runtime.EventDie, ID: "p", Name: "previewgate-pool-x-1"}, true, runtime.StateRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, f := newFakeManager(t, Config{})
			tpl := appListener(t)
			f.put(ContainerName("a"), runtime.StateRunning, map[string]string{runtime.LabelPort: itoa(tpl.Port)})
			if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
				t.Fatal(err)
			}
			m.applyEvent(tc.ev)
			if _, ok := cached(m, "a"); ok != tc.wantCache {
				t.Errorf("got cached %v, want %v", ok, tc.wantCache)
			}
			m.mu.RLock()
			state := m.sandboxes["a"].state
			m.mu.RUnlock()
			if state != tc.wantState {
				t.Errorf("got state %q, want %q", state, tc.wantState)
			}
		})
	}
}

// A paused container's endpoint must not stay cached: the next Ensure
// inspects Docker and unpauses it.
func TestEventThenEnsureWakes(t *testing.T) {
	m, f := newFakeManager(t, Config{})
	tpl := appListener(t)
	if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
		t.Fatal(err)
	}
	f.setState(ContainerName("a"), "", runtime.StatePaused)
	m.applyEvent(runtime.Event{Action: runtime.EventPause, ID: "id-" + ContainerName("a"), Name: ContainerName("a")})
	if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
		t.Fatal(err)
	}
	if got := f.state(ContainerName("a")); got != runtime.StateRunning {
		t.Errorf("got state %q, want running", got)
	}
}

func TestEventsReconnectBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		var mu sync.Mutex
		var calls []time.Time
		var sinces []time.Time
		f.events = func(ctx context.Context, since time.Time, fn func(runtime.Event)) error {
			mu.Lock()
			calls = append(calls, time.Now())
			sinces = append(sinces, since)
			n := len(calls)
			mu.Unlock()
			if n == 12 { // a healthy stream: one event, then it breaks
				fn(runtime.Event{Action: runtime.EventDie, Name: ContainerName("a"), Time: time.Now()})
				return errors.New("stream broke")
			}
			if n > 13 {
				<-ctx.Done()
				return ctx.Err()
			}
			return runtime.ErrUnavailable
		}
		m := New(Config{RecheckEvery: -1}, f, nil, nil) // the periodic re-check lists too
		t0 := time.Now()
		if err := m.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		mu.Lock()
		got := make([]time.Duration, 0, len(calls)-1)
		for i := 1; i < len(calls); i++ {
			got = append(got, calls[i].Sub(calls[i-1]))
		}
		firstSince, replaySince := sinces[0], sinces[12]
		mu.Unlock()
		ms := time.Millisecond
		want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms,
			12800 * ms, 25600 * ms, 30 * time.Second, 30 * time.Second,
			100 * ms, // the stream that delivered an event was healthy: start over
			200 * ms}
		if len(got) != len(want) {
			t.Fatalf("got gaps %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("gap %d: got %v, want %v (all %v)", i, got[i], want[i], got)
			}
		}
		if !firstSince.IsZero() {
			t.Errorf("got first since %v, want zero (only new events)", firstSince)
		}
		if want := calls11(t0, got); !replaySince.Equal(want) {
			t.Errorf("got replay since %v, want the last event's time %v", replaySince, want)
		}
		// Every reconnect resyncs by listing (plus Start's own list).
		if n := f.lists.Load(); n != int64(len(want))+1 {
			t.Errorf("got %d lists, want %d", n, len(want)+1)
		}
		m.Close() // waits for the watcher
	})
}

// calls11 is when the 12th subscription (the one with an event) started.
func calls11(t0 time.Time, gaps []time.Duration) time.Time {
	at := t0
	for _, g := range gaps[:11] {
		at = at.Add(g)
	}
	return at
}

// While the events stream is down, a cached endpoint is checked with the
// engine before use: its container may have ended unseen, and its address
// passed to another sandbox's container (#13). Once a resync follows the
// reconnect, the cache is trusted again: no engine call per request.
func TestEventsDownChecksCachedEndpoint(t *testing.T) {
	m, f := newFakeManager(t, Config{})
	// The manager's clock moves only when the test says: a check stands
	// for checkValid of it, however slowly a loaded machine runs the
	// calls in between (CI failed the "checked 100ms ago" step once).
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	m.now = func() time.Time { return time.Unix(0, clock.Load()) }
	pass := func(d time.Duration) { clock.Add(int64(d)) }
	broke, up := make(chan struct{}), make(chan struct{})
	var subs atomic.Int64
	f.events = func(ctx context.Context, _ time.Time, _ func(runtime.Event)) error {
		if subs.Add(1) == 1 {
			select {
			case <-broke:
				return errors.New("stream broke")
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		select {
		case <-up: // connected: stays up
			<-ctx.Done()
			return ctx.Err()
		default:
			return runtime.ErrUnavailable
		}
	}
	tpl := appListener(t)
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	first, err := m.Ensure(t.Context(), "a", tpl)
	if err != nil {
		t.Fatal(err)
	}
	ensureCalls := func() int64 {
		t.Helper()
		n := f.inspect.Load()
		ep, err := m.Ensure(t.Context(), "a", tpl)
		if err != nil {
			t.Fatal(err)
		}
		if ep.Instance == first.Instance && f.state(ContainerName("a")) != runtime.StateRunning {
			t.Fatalf("got the endpoint of a container that is %s", f.state(ContainerName("a")))
		}
		return f.inspect.Load() - n
	}
	if n := ensureCalls(); n != 0 {
		t.Fatalf("stream up: Ensure of a cached sandbox inspected %d times, want 0", n)
	}

	close(broke)
	testkit.WaitFor(t, "the manager to see the stream down", func() bool { return subs.Load() >= 3 })
	if n := ensureCalls(); n != 1 {
		t.Errorf("stream down, container running: Ensure inspected %d times, want 1", n)
	}
	if n := ensureCalls(); n != 0 {
		t.Errorf("stream down, checked %v ago: Ensure inspected %d times, want 0", checkValid, n)
	}
	pass(checkValid) // the check above no longer stands
	// A client that gives up does not drop a healthy endpoint.
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	m.Ensure(canceled, "a", tpl)
	// Its lookup goes on, detached: let it end before the clock moves, or
	// the check it stores late would stand in the steps below.
	m.trust.checks.Do("a", func() (any, error) { return true, nil })
	if _, ok := cached(m, "a"); !ok {
		t.Error("a canceled request dropped the endpoint of a running sandbox")
	}
	pass(checkValid)
	f.setState(ContainerName("a"), runtime.StateRunning, runtime.StateExited) // no event tells
	if ensureCalls(); f.state(ContainerName("a")) != runtime.StateRunning {
		t.Errorf("stream down, container exited unseen: Ensure did not wake it (state %s)", f.state(ContainerName("a")))
	}

	close(up)
	testkit.WaitFor(t, "a resync after the reconnect", func() bool { return !m.trust.eventsDown.Load() })
	if n := ensureCalls(); n != 0 {
		t.Errorf("after the resync: Ensure inspected %d times, want 0", n)
	}
}
