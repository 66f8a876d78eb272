package sandboxmgr

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestEnsureNoWake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   string // "" = no container
		wantErr error
	}{
		{"missing is asleep", "", ErrAsleep},
		{"exited is asleep", runtime.StateExited, ErrAsleep},
		{"paused is asleep", runtime.StatePaused, ErrAsleep},
		{"created is asleep", runtime.StateCreated, ErrAsleep},
		{"running is probed", runtime.StateRunning, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, f := newFakeManager(t, Config{})
			tpl := appListener(t)
			if tc.state != "" {
				f.put(ContainerName("a"), tc.state, map[string]string{runtime.LabelPort: itoa(tpl.Port)})
			}
			_, err := m.EnsureWith(t.Context(), "a", tpl, Options{NoWake: true})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if got := f.state(ContainerName("a")); got != tc.state {
				t.Errorf("got state %q, want %q unchanged", got, tc.state)
			}
			if n := f.creates.Load() + f.starts.Load(); n != 0 {
				t.Errorf("got %d creates+starts, want 0", n)
			}
		})
	}
}

// A NoWake caller waits for a wake something else started.
func TestEnsureNoWakeJoinsWakeInProgress(t *testing.T) {
	m, f := newFakeManager(t, Config{})
	tpl := appListener(t)
	entered, gate := make(chan struct{}), make(chan struct{})
	f.createHook = func(context.Context, runtime.Spec) error {
		close(entered)
		<-gate
		return nil
	}
	first := make(chan error, 1)
	go func() {
		_, err := m.Ensure(context.Background(), "a", tpl)
		first <- err
	}()
	<-entered
	second := make(chan error, 1)
	go func() {
		_, err := m.EnsureWith(context.Background(), "a", tpl, Options{NoWake: true})
		second <- err
	}()
	time.Sleep(10 * time.Millisecond) // let it reach the shared wake (no assertion on time)
	close(gate)
	if err := <-first; err != nil {
		t.Fatalf("waking caller: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("NoWake caller during a wake: got %v, want the shared endpoint", err)
	}
	if n := f.creates.Load(); n != 1 {
		t.Errorf("got %d creates, want 1", n)
	}
}

func TestEnsureOnCreate(t *testing.T) {
	errQuota := errors.New("quota")
	for _, tc := range []struct {
		name      string
		state     string
		hookErr   error
		wantCalls int
		wantErr   error
	}{
		{"create calls it", "", nil, 1, nil},
		{"refusal stops the create", "", errQuota, 1, errQuota},
		{"start does not", runtime.StateExited, nil, 0, nil},
		{"unpause does not", runtime.StatePaused, nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, f := newFakeManager(t, Config{})
			tpl := appListener(t)
			if tc.state != "" {
				f.put(ContainerName("a"), tc.state, map[string]string{runtime.LabelPort: itoa(tpl.Port)})
			}
			calls := 0
			_, err := m.EnsureWith(t.Context(), "a", tpl, Options{OnCreate: func() error { calls++; return tc.hookErr }})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if calls != tc.wantCalls {
				t.Errorf("got %d OnCreate calls, want %d", calls, tc.wantCalls)
			}
			if tc.hookErr != nil && f.creates.Load() != 0 {
				t.Errorf("got %d creates after a refusal, want 0", f.creates.Load())
			}
		})
	}
}
