package sandboxmgr

import (
	"testing"
	"time"
)

func TestStartRemovesHalfMade(t *testing.T) {
	for _, tc := range []struct {
		name        string
		state       string
		age         time.Duration
		staleCreate time.Duration
		wantKept    bool
	}{
		{"old created is removed", stateCreated, 5 * time.Minute, 0, false},
		{"young created is kept (a create in flight)", stateCreated, 10 * time.Second, 0, true},
		{"any age with negative bound", stateCreated, 0, -1, false},
		{"exited is kept", stateExited, time.Hour, -1, true},
		{"running is kept", stateRunning, time.Hour, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			m := newManager(Config{StaleCreate: tc.staleCreate, ReapEvery: -1}, f, nil, nil)
			defer m.Close()
			for _, name := range []string{ContainerName("a"), "previewgate-pool-t-x"} {
				f.put(name, tc.state, map[string]string{LabelManaged: "true", LabelSandbox: "a"})
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
