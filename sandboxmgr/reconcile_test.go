package sandboxmgr

import (
	"testing"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestStartRemovesHalfMade(t *testing.T) {
	for _, tc := range []struct {
		name        string
		state       string
		age         time.Duration
		staleCreate time.Duration
		wantKept    bool
	}{
		{"old created is removed", runtime.StateCreated, 5 * time.Minute, 0, false},
		{"young created is kept (a create in flight)", runtime.StateCreated, 10 * time.Second, 0, true},
		{"any age with negative bound", runtime.StateCreated, 0, -1, false},
		{"exited is kept", runtime.StateExited, time.Hour, -1, true},
		{"running is kept", runtime.StateRunning, time.Hour, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			m := New(Config{StaleCreate: tc.staleCreate, ReapEvery: -1}, f, nil, nil)
			defer m.Close()
			for _, name := range []string{ContainerName("a"), "previewgate-pool-t-x"} {
				f.put(name, tc.state, map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: "a"})
				f.ctrs[name].Created = time.Now().Add(-tc.age)
			}
			if err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{ContainerName("a"), "previewgate-pool-t-x"} {
				if kept := f.state(name) != ""; kept != tc.wantKept {
					t.Errorf("%s: got kept %v, want %v", name, kept, tc.wantKept)
				}
			}
		})
	}
}
