package sandboxmgr_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/records"
)

// Per-sandbox settings kept by the runtime (#23), on the real engine and
// the real API server, with two managers (replicas) that share nothing
// but it. (A Docker engine is served by one gateway per scope; there the
// two managers share its records store, which stands in for the API
// server, and the engine is only the quicker runtime to test on.)

// settingsTwoReplicas runs the shared checks: concurrent writers from both
// replicas lose nothing, a setting made on one is seen by the other within
// the re-check bound, keep-up holds both reapers off an idle sandbox and
// its end lets them stop it (b reaps, a only serves and sets), and a remove takes the record along
// (records counts what the runtime keeps for id).
//
// The managers read their template from tpls: it keeps the sandbox up
// (idle_timeout 1h) until the keep-up is in place, and only then turns to
// a 2 s idle timeout, so no reaper stops the sandbox before the keep-up
// phase, however slow the phases before it run.
func settingsTwoReplicas(t *testing.T, a, b *mgrtest.Manager, tpls *atomic.Pointer[config.Template], recheck time.Duration, countRecords func(id string) int) {
	ctx := t.Context()
	id := newID()
	tpl := new(*tpls.Load())
	tpl.IdleTimeout = config.Duration(2 * time.Second)
	if _, err := a.Ensure(ctx, id, tpls.Load()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, "b knows the sandbox", func() bool { _, ok := b.Known(id); return ok })

	// Concurrent writers on both replicas: every write lands (the record's
	// version guards it).
	var wg sync.WaitGroup
	for i := range 8 {
		m := []*mgrtest.Manager{a, b}[i%2]
		wg.Go(func() {
			_, err := m.Records.Update(ctx, id, func(s *records.Settings) error {
				s.Links = append(s.Links, links.Link{ID: fmt.Sprintf("l%d", i), Expires: time.Now().Add(time.Hour)})
				return nil
			})
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if s, err := b.Records.Load(ctx, id); err != nil || len(s.Links) != 8 {
		t.Fatalf("after 8 concurrent writes over two replicas: %d links (%v), want 8", len(s.Links), err)
	}

	yes := true
	if _, err := a.Records.Update(ctx, id, func(s *records.Settings) error { s.Public = &yes; return nil }); err != nil {
		t.Fatal(err)
	}
	took := waitUntil(t, 3*recheck+5*time.Second, "b sees public", func() bool { s, _ := b.Records.Settings(id); return s.Public != nil && *s.Public })
	t.Logf("a setting made on one replica seen by the other after %v (re-check every %v)", took, recheck)

	// Keep-up set on a: no traffic for five idle timeouts, still running.
	keep := time.Now().Add(time.Minute).Truncate(time.Second)
	if _, err := a.Records.Update(ctx, id, func(s *records.Settings) error {
		s.KeepUpUntil = keep
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 3*recheck+5*time.Second, "b sees the keep-up", func() bool { s, _ := b.Records.Settings(id); return !s.KeepUpUntil.IsZero() })
	if st := state(t, a, id); st != "running" {
		t.Fatalf("before the idle timeout turns short: state %q, want running", st)
	}
	tpls.Store(tpl)
	time.Sleep(5 * tpl.IdleTimeout.D())
	if st := state(t, a, id); st != "running" {
		t.Fatalf("kept up for a minute, idle for %v: state %q, want running", 5*tpl.IdleTimeout.D(), st)
	}
	// Why it is awake, as b (whose reaper holds off) explains it: the
	// keep-up, with the stop due when it ends.
	list, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, in := range list {
		found = found || in.ID == id
		if in.ID == id && (in.Awake == nil || in.Awake.Summary != "kept up" || !in.Awake.StopsAt.Equal(keep) || !in.Awake.KeepUntil.Equal(keep)) {
			t.Errorf("b's why-awake for a kept-up sandbox: %+v, want summary \"kept up\" stopping at %v", in.Awake, keep)
		}
	}
	if !found {
		t.Errorf("b's list lacks %s", id)
	}
	if _, err := a.Records.Update(ctx, id, func(s *records.Settings) error { s.KeepUpUntil = time.Time{}; return nil }); err != nil {
		t.Fatal(err)
	}
	took = waitUntil(t, 60*time.Second, "stopped once the keep-up ended", func() bool { return state(t, a, id) != "running" })
	t.Logf("stopped %v after the keep-up ended (idle_timeout %v)", took, tpl.IdleTimeout.D())

	if n := countRecords(id); n != 1 {
		t.Fatalf("records kept for the sandbox: %d, want 1", n)
	}
	if err := b.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The settings and links go; a removal mark stays for a while
	// (tombstone.go).
	if n := countRecords(id); n != 1 {
		t.Errorf("records left after remove: %d, want 1 (the removal mark)", n)
	}
	if s, err := a.Records.Load(ctx, id); err != nil || s.Public != nil || !s.KeepUpUntil.IsZero() || len(s.Links) != 0 {
		t.Errorf("settings after remove: %+v %v, want none", s, err)
	}
}

func state(t *testing.T, m *mgrtest.Manager, id string) string {
	t.Helper()
	list, err := m.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range list {
		if i.ID == id {
			return i.State
		}
	}
	return ""
}

func waitUntil(t *testing.T, within time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !f() {
		if time.Since(t0) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(t0)
}

func TestDockerSettingsTwoReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tpl := testTemplate(t, nil)
	var tpls atomic.Pointer[config.Template]
	tpl.IdleTimeout = config.Duration(time.Hour) // settingsTwoReplicas turns it short
	tpl.MaxSocketIdle, tpl.RemoveAfter = config.Duration(time.Hour), config.Duration(time.Hour)
	e.cfg.Templates = func(string) *config.Template { return tpls.Load() }
	tpls.Store(tpl)
	e.cfg.RecheckEvery, e.cfg.ReapEvery = time.Second, 200*time.Millisecond
	b := e.manager(t)
	e.cfg.ReapEvery = -1 // a only serves: b's reaper must see a's keep-up
	a := e.manager(t)
	settingsTwoReplicas(t, a, b, &tpls, e.cfg.RecheckEvery, func(id string) int {
		list, err := e.rt.Records.ListRecords(context.Background(), map[string]string{records.LabelRecord: id})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	})
}

func TestKubernetesSettingsTwoReplicas(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	var tpls atomic.Pointer[config.Template]
	tpl.IdleTimeout = config.Duration(time.Hour) // settingsTwoReplicas turns it short
	tpl.MaxSocketIdle, tpl.RemoveAfter = config.Duration(time.Hour), config.Duration(time.Hour)
	cfg := e.config()
	cfg.Templates = func(string) *config.Template { return tpls.Load() }
	tpls.Store(tpl)
	cfg.RecheckEvery, cfg.ReapEvery = time.Second, 200*time.Millisecond
	cfg.Kubernetes.ActivityEvery = 500 * time.Millisecond
	b := e.manager(t, cfg)
	cfg.ReapEvery = -1 // a only serves: b's reaper must see a's keep-up
	a := e.manager(t, cfg)
	settingsTwoReplicas(t, a, b, &tpls, cfg.RecheckEvery, func(id string) int {
		list, err := e.cs.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: records.LabelRecord + "=" + id})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	})
}
