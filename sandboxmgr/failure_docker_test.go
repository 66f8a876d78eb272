package sandboxmgr_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A failed start is explained (#16): why, with the app's last output, and
// the container is not left running.
func TestDockerStartFailureExplained(t *testing.T) {
	t.Parallel()
	const crash = "Error: Cannot find module './missing'"
	for _, tc := range []struct {
		name    string
		env     map[string]string
		timeout time.Duration
		reasons []string
		logs    string // a line that must be in the logs
		oom     bool   // killed at the memory limit
	}{
		{name: "app exits", env: map[string]string{"CRASH": crash},
			reasons: []string{sandboxmgr.ReasonExited, sandboxmgr.ReasonCrashLoop}, logs: crash},
		{name: "never listens", env: map[string]string{"NEVER_LISTEN": "1"}, timeout: 4 * time.Second, // time to print under load
			reasons: []string{sandboxmgr.ReasonReadyTimeout}, logs: "testapp: NEVER_LISTEN=1, not listening"},
		// Over the template's 64 MiB: the kernel kills it, and the failure
		// says so (a newcomer saw only "exit code 137").
		{name: "out of memory", env: map[string]string{"EAT_MIB": "256"}, oom: true,
			reasons: []string{sandboxmgr.ReasonExited, sandboxmgr.ReasonCrashLoop}, logs: "testapp: eating 256 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			m := e.manager(t)
			tpl := testTemplate(t, tc.env)
			if tc.timeout > 0 {
				tpl.Ready.Timeout = config.Duration(tc.timeout)
			}
			id := newID()
			t0 := time.Now()
			_, err := m.Ensure(t.Context(), id, tpl)
			var se *sandboxmgr.StartError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *StartError", err)
			}
			if !errors.Is(err, sandboxmgr.ErrNotReady) {
				t.Errorf("got %v, want it to wrap ErrNotReady", err)
			}
			if !slices.Contains(tc.reasons, se.Reason) {
				t.Errorf("got reason %q, want one of %q", se.Reason, tc.reasons)
			}
			if se.OOMKilled != tc.oom {
				t.Errorf("got OOMKilled %v, want %v (exit code %d)", se.OOMKilled, tc.oom, se.ExitCode)
			}
			has := func(lines []string) bool {
				return slices.ContainsFunc(lines, func(s string) bool { return strings.Contains(s, tc.logs) })
			}
			if !has(se.Logs) {
				t.Errorf("got logs %q, want the line %q (sanitized)", se.Logs, tc.logs)
			}
			if took := time.Since(t0); tc.timeout == 0 && took > 10*time.Second {
				t.Errorf("took %s to report an app that exits at once", took)
			}
			for _, c := range e.containers(t, id) {
				if c.State == "running" {
					t.Errorf("container %s is %s after the failed start, want stopped", c.Names, c.State)
				}
			}
			p := m.Sandbox(id).Snapshot().Progress
			if p.Phase != sandboxmgr.PhaseFailed || !has(p.Logs) {
				t.Errorf("got progress %s with logs %q, want failed with %q", p.Phase, p.Logs, tc.logs)
			}
			lines, err := tailLogs(t.Context(), m, id, 5)
			if err != nil || !has(lines) {
				t.Errorf("Logs: got %q, %v; want the line %q", lines, err, tc.logs)
			}
			// The list says why the last start failed (#24, 6).
			list, err := m.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(list, func(in sandboxmgr.Info) bool { return in.ID == id })
			if i < 0 || list[i].LastFailure == nil || list[i].LastFailure.Reason != se.Reason ||
				(list[i].LastFailure.ExitCode != nil) != (se.Reason != sandboxmgr.ReasonReadyTimeout) {
				t.Errorf("List: got %+v, want last failure %s", list, se.Reason)
			} else if c := list[i].LastFailure.ExitCode; c != nil && *c != se.ExitCode {
				t.Errorf("List: got exit code %d, want %d", *c, se.ExitCode)
			}
			if tc.timeout > 0 {
				return
			}
			// Another failed wake of the same container: its output is set
			// apart from the earlier runs'.
			_, err = m.Ensure(t.Context(), id, tpl)
			if !errors.As(err, &se) {
				t.Fatalf("second wake: got %v, want a *StartError", err)
			}
			sep := slices.IndexFunc(se.Logs, func(s string) bool { return strings.HasPrefix(s, docker.RunSeparator) })
			if sep <= 0 || !has(se.Logs[sep:]) {
				t.Errorf("second wake: got logs %q, want earlier runs, a separator, then this run's %q", se.Logs, tc.logs)
			}
		})
	}
}

func TestDockerMissingImageExplained(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager(t)
	tpl := testTemplate(t, nil)
	tpl.Image = "previewgate-no-such-image:x"
	_, err := m.Ensure(t.Context(), newID(), tpl)
	var se *sandboxmgr.StartError
	if !errors.As(err, &se) || se.Reason != sandboxmgr.ReasonImageMissing || !errors.Is(err, runtime.ErrNoImage) {
		t.Fatalf("got %v, want a StartError image_missing wrapping ErrNoImage", err)
	}
}

// Logs and FollowLogs of a running sandbox, and of none.
func TestDockerLogs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager(t)
	id := newID()
	if _, err := m.Ensure(t.Context(), id, testTemplate(t, nil)); err != nil {
		t.Fatal(err)
	}
	// The app prints its line before it listens, but Docker copies a
	// container's output to its log asynchronously: the sandbox can be
	// ready before the line is in the log, so poll for it.
	testkit.WaitFor(t, "the listening line in the sandbox's log", func() bool {
		lines, err := tailLogs(t.Context(), m, id, 10)
		if err != nil {
			t.Fatalf("Logs: %v", err)
		}
		return slices.ContainsFunc(lines, func(s string) bool { return strings.Contains(s, "listening on :3000") })
	})
	var got []string
	errStop := errors.New("enough")
	err := followLogs(t.Context(), m, id, 10, func(l string) error {
		got = append(got, l)
		return errStop
	})
	if !errors.Is(err, errStop) || len(got) != 1 {
		t.Errorf("FollowLogs: got %q, %v; want one line then the callback's error", got, err)
	}
	if _, err := tailLogs(t.Context(), m, newID(), 10); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Logs of no sandbox: got %v, want ErrNoContainer", err)
	}
}

// tailLogs returns sandbox id's last tail lines of output, as the admin
// API reads them.
func tailLogs(ctx context.Context, m *mgrtest.Manager, id string, tail int) ([]string, error) {
	s, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return sandboxmgr.TailLogs(ctx, m.Runtime.Capabilities().Logs, s.Container, tail)
}

// followLogs follows sandbox id's output, as the admin API does.
func followLogs(ctx context.Context, m *mgrtest.Manager, id string, tail int, fn func(string) error) error {
	s, err := m.Get(ctx, id)
	if err != nil {
		return err
	}
	return sandboxmgr.FollowLogs(ctx, m.Runtime.Capabilities().Logs, s.Container, tail, fn)
}
