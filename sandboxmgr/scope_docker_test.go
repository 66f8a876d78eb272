package sandboxmgr_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A previewgate-<id> container that lacks the manager's scope labels (here:
// another gateway's, managed but of another scope) is neither started,
// stopped, removed nor listed; Ensure fails with ErrForeignContainer and the
// container is untouched afterwards (#13).
func TestDockerForeignContainer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start bool
	}{
		{"created", false},
		{"running", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			m := e.manager(t) // also creates e.network
			id := newID()
			labels := dockertest.Labels() // cleanup labels, not the manager's scope
			labels[runtime.LabelManaged] = "true"
			labels[runtime.LabelSandbox] = id
			r, err := e.cli.ContainerCreate(t.Context(),
				&container.Config{Image: dockertest.TestAppImage(t), Labels: labels},
				&container.HostConfig{NetworkMode: container.NetworkMode(e.network)},
				&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{e.network: {}}},
				nil, e.name(id))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				e.cli.ContainerRemove(t.Context(), r.ID, container.RemoveOptions{Force: true})
			})
			if tc.start {
				if err := e.cli.ContainerStart(t.Context(), r.ID, container.StartOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			before, err := e.cli.ContainerInspect(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}

			// Its start event must not count it as this manager's.
			time.Sleep(500 * time.Millisecond)
			if n := m.States()["running"]; n != 0 {
				t.Errorf("got %d running sandboxes after the foreign start, want 0", n)
			}
			_, err = m.Ensure(t.Context(), id, testTemplate(t, nil))
			if !errors.Is(err, runtime.ErrForeign) {
				t.Errorf("Ensure: got %v, want ErrForeignContainer", err)
			}
			// Nothing to remove besides the container: its record, if any,
			// is in its own gateway's data dir, in nobody else's way.
			if fe := (*sandboxmgr.ForeignError)(nil); !errors.As(err, &fe) || fe.Record != "" {
				t.Errorf("Ensure: got %v, want a ForeignError naming no record", err)
			}
			if _, err := m.Ensure(t.Context(), id, nil); !errors.Is(err, runtime.ErrForeign) {
				t.Errorf("Ensure without template: got %v, want ErrForeignContainer", err)
			}
			// Refused, it is no sandbox of this manager's: the metrics'
			// previewgate_sandboxes counted it "unknown" for good.
			if st := m.States(); len(st) != 0 {
				t.Errorf("States after refusing a foreign container: %v, want none", st)
			}
			if err := m.Stop(t.Context(), id); !errors.Is(err, runtime.ErrForeign) {
				t.Errorf("Stop: got %v, want ErrForeignContainer", err)
			}
			if err := m.Remove(t.Context(), id); !errors.Is(err, runtime.ErrForeign) {
				t.Errorf("Remove: got %v, want ErrForeignContainer", err)
			}
			list, err := m.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range list {
				if s.ID == id || s.Container == r.ID {
					t.Errorf("List: got %+v, want the foreign container left out", s)
				}
			}
			// A second manager's Start (reconciliation) adopts or removes
			// nothing of it either, even as a stale half-made container.
			e.cfg.StaleCreate = -1
			m2 := e.manager(t)
			if _, ok := m2.Cached(id); ok {
				t.Error("Start adopted the foreign container")
			}

			after, err := e.cli.ContainerInspect(t.Context(), r.ID)
			if err != nil {
				t.Fatalf("foreign container gone: %v", err)
			}
			if after.State.Status != before.State.Status || after.State.StartedAt != before.State.StartedAt ||
				after.Name != before.Name || after.RestartCount != before.RestartCount {
				t.Errorf("got %s %s started %s, want it untouched: %s %s started %s",
					after.Name, after.State.Status, after.State.StartedAt, before.Name, before.State.Status, before.State.StartedAt)
			}
		})
	}
}

// TestDockerUnlabelledGatewayLeavesScopedSandboxes (#21, 4): two gateways
// on one engine. One has a scope (labels); one has none. The one without
// never adopts, lists, wakes, stops or serves the other's sandboxes: its
// sandbox of the same id is another container, under another name.
func TestDockerUnlabelledGatewayLeavesScopedSandboxes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	scoped := e.manager(t)
	id := newID()
	if _, err := scoped.Ensure(t.Context(), id, testTemplate(t, nil)); err != nil {
		t.Fatal(err)
	}
	before, err := e.cli.ContainerInspect(t.Context(), e.name(id))
	if err != nil {
		t.Fatal(err)
	}
	// No labels at all: it sees every managed container on the engine
	// (other tests' too), so it must neither reap nor remove half-made ones.
	bare, err := mgrtest.New(mgrtest.Config{Config: sandboxmgr.Config{Network: e.network, ReapEvery: -1, StaleCreate: 24 * time.Hour}},
		slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Close() })
	if err := bare.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := bare.Cached(id); ok {
		t.Error("the gateway without labels adopted the scoped gateway's running sandbox")
	}
	if _, ok := bare.Known(id); ok {
		t.Error("the gateway without labels knows the scoped gateway's sandbox")
	}
	ep, err := bare.Ensure(t.Context(), id, testTemplate(t, nil))
	if err != nil || strings.HasPrefix(ep.Instance, before.ID) {
		t.Errorf("Ensure: got %+v %v, want a sandbox of its own", ep, err)
	}
	if err := bare.Stop(t.Context(), id); err != nil {
		t.Errorf("Stop of its own: %v", err)
	}
	list, err := bare.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Container == before.ID {
			t.Errorf("List: got %+v, want the scoped gateway's sandbox left out", s)
		}
	}
	if err := bare.Remove(t.Context(), id); err != nil {
		t.Errorf("Remove of its own: %v", err)
	}
	after, err := e.cli.ContainerInspect(t.Context(), before.ID)
	if err != nil || after.State.Status != "running" || after.State.StartedAt != before.State.StartedAt {
		t.Errorf("got %v %v, want the scoped sandbox untouched and running", after.State, err)
	}
	// The scoped gateway still serves it.
	if _, err := scoped.Ensure(t.Context(), id, nil); err != nil {
		t.Errorf("scoped Ensure after: %v", err)
	}
}
