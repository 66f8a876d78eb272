package sandboxmgr

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestAwakeIsTheReapersPlan: what the list says (Info.Awake.StopsAt) is
// when the reaper stops the sandbox, with and without an open socket; a
// paused or stopped sandbox has no why-awake.
func TestAwakeIsTheReapersPlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := reapWorld(t, config.Template{IdleTimeout: dur(10 * time.Second), MaxSocketIdle: dur(30 * time.Second), IdleAction: config.IdlePause}, func(string) {})
		m.Sandbox("a").Touch()
		a := awakeOf(t, m)
		if a.Rule != "idle_timeout" || a.Action != "pause" || !a.StopsAt.Equal(a.LastActivity.Add(10*time.Second)) ||
			!strings.Contains(strings.Join(a.Reasons, "|"), "last request") {
			t.Fatalf("after a request: got %+v", a)
		}
		release := m.Sandbox("a").Hold()
		a = awakeOf(t, m)
		if a.Rule != "max_socket_idle" || a.OpenSockets != 1 || !a.StopsAt.Equal(a.IdleFrom.Add(30*time.Second)) {
			t.Fatalf("with a socket: got %+v", a)
		}
		stopsAt := a.StopsAt
		time.Sleep(time.Until(stopsAt) - time.Millisecond)
		synctest.Wait()
		wantState(t, f, runtime.StateRunning)
		// The reaper acts at its first round from StopsAt on.
		time.Sleep(m.cfg.ReapEvery + 2*time.Millisecond)
		synctest.Wait()
		wantState(t, f, runtime.StateExited)
		release()
		if a := awakeOf(t, m); a != nil {
			t.Errorf("stopped: got %+v, want no why-awake", a)
		}
	})
}

func awakeOf(t *testing.T, m *Manager) *Awake {
	t.Helper()
	list, err := m.List(t.Context())
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	return list[0].Awake
}
