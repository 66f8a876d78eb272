package sandboxmgr_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

// goneFunc is a Listener that reports InstanceGone only.
type goneFunc func(instance string)

func (goneFunc) BeforeStop(string)              {}
func (f goneFunc) InstanceGone(instance string) { f(instance) }

// A container stopped or restarted behind the gateway's back is a new
// instance once it runs again, and the old one is reported gone (from the
// events stream) before the next Ensure, so the gateway can close its
// pooled connections to it (#13).
func TestDockerInstanceGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, e *env, ctr string)
	}{
		{"docker stop", func(t *testing.T, e *env, ctr string) {
			timeout := 0
			if err := e.cli.ContainerStop(t.Context(), ctr, container.StopOptions{Timeout: &timeout}); err != nil {
				t.Fatal(err)
			}
		}},
		{"docker restart", func(t *testing.T, e *env, ctr string) {
			timeout := 0
			if err := e.cli.ContainerRestart(t.Context(), ctr, container.StopOptions{Timeout: &timeout}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var mu sync.Mutex
			var gone []string
			e.listener = goneFunc(func(inst string) {
				mu.Lock()
				gone = append(gone, inst)
				mu.Unlock()
			})
			reported := func(inst string) bool {
				mu.Lock()
				defer mu.Unlock()
				return slices.Contains(gone, inst)
			}
			m := e.manager(t)
			id := newID()
			tpl := testTemplate(t, nil)
			ep1, err := m.Ensure(t.Context(), id, tpl)
			if err != nil {
				t.Fatal(err)
			}
			c, err := e.cli.ContainerInspect(t.Context(), e.name(id))
			if err != nil {
				t.Fatal(err)
			}
			if ep1.Instance == "" || ep1.Instance[:len(c.ID)] != c.ID {
				t.Fatalf("got instance %q, want %s@<start>", ep1.Instance, c.ID)
			}
			tc.do(t, e, c.ID)
			for deadline := time.Now().Add(10 * time.Second); !reported(ep1.Instance); {
				if time.Now().After(deadline) {
					t.Fatalf("got gone %q, want %q reported within 10s", gone, ep1.Instance)
				}
				time.Sleep(20 * time.Millisecond)
			}
			ep2, err := m.Ensure(t.Context(), id, tpl)
			if err != nil {
				t.Fatalf("Ensure after %s: %v", tc.name, err)
			}
			if ep2.Instance == ep1.Instance || ep2.Instance[:len(c.ID)] != c.ID {
				t.Errorf("got instance %q, want a new run of %s (was %q)", ep2.Instance, c.ID, ep1.Instance)
			}
			if reported(ep2.Instance) {
				t.Errorf("got the new instance %q reported gone", ep2.Instance)
			}
			get(t, ep2)
		})
	}
}
