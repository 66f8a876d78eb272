package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// lookupDown is a fake engine whose Lookup can be made unreachable.
type lookupDown struct {
	*fakeEngine
	down atomic.Bool
}

func (l *lookupDown) Lookup(ctx context.Context, name string) (runtime.Instance, error) {
	if l.down.Load() {
		l.inspect.Add(1)
		return runtime.Instance{}, fmt.Errorf("inspect %s: %w", name, runtime.ErrUnavailable)
	}
	return l.fakeEngine.Lookup(ctx, name)
}

// TestConfirm: Confirm asks the runtime once, every time (no cache), and
// confirms only the sandbox's instance, the same run, running, on the
// address dialed. Anything else is ErrMoved, drops the cached endpoint and
// reports the instance gone; a runtime that cannot be asked is an error
// that is not ErrMoved and drops nothing (the caller fails closed).
func TestConfirm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, m *Manager, f *lookupDown, tpl *config.Template)
		addr   func(ep Endpoint) string
		inst   func(t *testing.T, m *Manager, ep Endpoint) string
		want   error // nil, ErrMoved or runtime.ErrUnavailable
	}{
		{name: "running"},
		{name: "other port", addr: func(ep Endpoint) string { return "127.0.0.1:1" }},
		{name: "restarted", want: ErrMoved, change: func(t *testing.T, m *Manager, f *lookupDown, _ *config.Template) {
			f.restart(ContainerName("a"))
		}},
		{name: "stopped", want: ErrMoved, change: func(t *testing.T, m *Manager, f *lookupDown, _ *config.Template) {
			f.setState(ContainerName("a"), runtime.StateRunning, runtime.StateExited)
		}},
		{name: "paused", want: ErrMoved, change: func(t *testing.T, m *Manager, f *lookupDown, _ *config.Template) {
			f.setState(ContainerName("a"), runtime.StateRunning, runtime.StatePaused)
		}},
		{name: "removed", want: ErrMoved, change: func(t *testing.T, m *Manager, f *lookupDown, _ *config.Template) {
			f.Remove(t.Context(), ContainerName("a"))
		}},
		{name: "other address", want: ErrMoved, addr: func(ep Endpoint) string { return "127.0.0.2:3000" }},
		{name: "another sandbox's instance", want: ErrMoved, inst: func(t *testing.T, m *Manager, ep Endpoint) string {
			epB, err := m.Ensure(t.Context(), "b", appListener(t))
			if err != nil {
				t.Fatal(err)
			}
			return epB.Instance // b's container, running on 127.0.0.1 too
		}},
		{name: "runtime unreachable", want: runtime.ErrUnavailable, change: func(t *testing.T, m *Manager, f *lookupDown, _ *config.Template) {
			f.down.Store(true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &lookupDown{fakeEngine: newFake()}
			m := New(Config{}, f, nil, nil)
			t.Cleanup(func() { m.Close() })
			rec := &goneRecorder{m: m}
			m.SetListener(rec)
			tpl := appListener(t)
			ep, err := m.Ensure(t.Context(), "a", tpl)
			if err != nil {
				t.Fatal(err)
			}
			inst, addr := ep.Instance, ep.Addr
			if tc.inst != nil {
				inst = tc.inst(t, m, ep)
			}
			if tc.addr != nil {
				addr = tc.addr(ep)
			}
			if tc.change != nil {
				tc.change(t, m, f, tpl)
			}
			rec.reset()
			before := f.inspect.Load()
			for i := range 2 {
				err := m.Sandbox("a").Confirm(t.Context(), inst, addr)
				if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
					t.Fatalf("Confirm %d: %v, want %v", i, err, tc.want)
				}
				if tc.want == runtime.ErrUnavailable && errors.Is(err, ErrMoved) {
					t.Fatalf("Confirm with the runtime unreachable: %v, must not say moved", err)
				}
			}
			if n := f.inspect.Load() - before; n != 2 {
				t.Errorf("two confirmations made %d runtime calls, want 2 (never a cache)", n)
			}
			_, ok := cached(m, "a")
			moved := tc.want == ErrMoved
			if ok == moved && tc.inst == nil {
				t.Errorf("after Confirm (%v), cached: %v", tc.want, ok)
			}
			if got := rec.reported(); moved != slices.Contains(got, inst) {
				t.Errorf("instances reported gone: %v (confirmation %v)", got, tc.want)
			}
		})
	}
}

// TestConfirmCanceled: a caller giving up is its context's error, never
// ErrMoved, and drops nothing.
func TestConfirmCanceled(t *testing.T) {
	m, _ := newFakeManager(t, Config{})
	ep, err := m.Ensure(t.Context(), "a", appListener(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = m.Sandbox("a").Confirm(ctx, ep.Instance, ep.Addr)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrMoved) {
		t.Fatalf("Confirm with a canceled context: %v", err)
	}
	if _, ok := cached(m, "a"); !ok {
		t.Fatal("a canceled confirmation dropped the endpoint")
	}
}
