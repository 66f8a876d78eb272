package sandboxmgr_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// TestKubernetesReplicasRunningCaps: the bound docs/configuration.md
// states for max_running_per_subject and max_running across two replicas
// on one kube-apiserver. Six first wakes at once, three through each
// replica: each replica admits at most the cap (its own starts in flight
// count), so at most cap × replicas run; then, with those running and
// seen by both, a new wake through either replica is refused.
func TestKubernetesReplicasRunningCaps(t *testing.T) {
	t.Parallel()
	const capped, replicas, n = 2, 2, 6
	for _, tc := range []struct {
		name    string
		cfg     func(*sandboxmgr.Config)
		opts    sandboxmgr.Options
		refused error
	}{
		{"max_running_per_subject", nil,
			sandboxmgr.Options{Subject: "alice", SubjectMaxRunning: capped}, sandboxmgr.ErrSubjectLimit},
		{"max_running", func(c *sandboxmgr.Config) { c.MaxRunning = capped },
			sandboxmgr.Options{}, sandboxmgr.ErrCapacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newKubeEnv(t)
			tpl := testTemplate(t, nil)
			cfg := e.config()
			cfg.Templates = func(string) *config.Template { return tpl }
			if tc.cfg != nil {
				tc.cfg(&cfg.Config)
			}
			ms := []*mgrtest.Manager{e.manager(t, cfg), e.manager(t, cfg)}

			wake := func(ids []string) (ok [replicas]int) {
				var mu sync.Mutex
				var wg sync.WaitGroup
				for i, id := range ids {
					wg.Go(func() {
						_, err := ms[i%replicas].EnsureWith(t.Context(), id, tpl, tc.opts)
						switch {
						case err == nil:
							mu.Lock()
							ok[i%replicas]++
							mu.Unlock()
						case !errors.Is(err, tc.refused):
							t.Errorf("%s: got %v, want it ready or refused with %v", id, err, tc.refused)
						}
					})
				}
				wg.Wait()
				return ok
			}
			ids := make([]string, n)
			for i := range ids {
				ids[i] = newID()
			}
			ok := wake(ids)
			total := 0
			for r, k := range ok {
				if k > capped {
					t.Errorf("replica %d admitted %d, want at most %d", r, k, capped)
				}
				total += k
			}
			if total < capped || total > capped*replicas {
				t.Fatalf("got %d ready (%v by replica), want %d to %d", total, ok, capped, capped*replicas)
			}
			running := 0
			for _, id := range ids {
				for _, p := range e.pods(t, id) {
					if p.Status.Phase == "Running" {
						running++
					}
				}
			}
			if running != total {
				t.Errorf("got %d pods running, want %d (one per ready wake)", running, total)
			}
			t.Logf("%d of %d ready at once (%v by replica)", total, n, ok)

			// Both replicas see them running (watch): no replica starts another.
			waitWithin(t, 10*time.Second, "both replicas to see the running pods", func() bool {
				for _, m := range ms {
					if m.States()["running"] < total {
						return false
					}
				}
				return true
			})
			more := []string{newID(), newID()}
			if ok := wake(more); ok != [replicas]int{} {
				t.Errorf("with %d running: got %v ready by replica, want every new wake refused", total, ok)
			}
			for _, id := range more {
				if p := e.pods(t, id); len(p) != 0 {
					t.Errorf("%s: got %d pods for a refused wake, want none", id, len(p))
				}
			}
		})
	}
}
