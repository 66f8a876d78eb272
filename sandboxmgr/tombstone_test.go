package sandboxmgr_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A DELETE on one replica holds against a wake of the same sandbox on
// another (tombstone.go), on the real engine and the real API server: two
// managers on one runtime are two replicas that share nothing else.
// running counts the instances of id that run (or are being made);
// records counts what the runtime keeps as id's record.
func removalTwoReplicas(t *testing.T, a, b *mgrtest.Manager, tpl *config.Template, recheck time.Duration, running, records func(id string) int) {
	ctx := t.Context()

	// A DELETE on a while b creates the sandbox: a finds no container yet
	// (b's create comes right after OnCreate), answers 404, and b must
	// not go on to run it: it stops and removes what it made, as on one
	// replica. It used to run after a answered.
	id := newID()
	var delErr error
	_, err := b.EnsureWith(ctx, id, tpl, sandboxmgr.Options{OnCreate: func() error {
		delErr = a.Remove(ctx, id)
		return nil
	}})
	if delErr != nil && !errors.Is(delErr, runtime.ErrNotFound) {
		t.Fatalf("DELETE on a while b creates: %v", delErr)
	}
	if !errors.Is(err, runtime.ErrNotFound) || !strings.Contains(err.Error(), "removed while") {
		t.Errorf("b's wake begun before a's DELETE: got %v, want ErrNoContainer saying it was removed while it started", err)
	}
	if n := running(id); n != 0 {
		t.Errorf("after a's DELETE and b's wake answered: %d instances of %s, want none", n, id)
	}

	// The mark outlives the re-checks of both replicas (the sandbox has
	// no instance: its record looks like an orphan's), and keeps no
	// settings.
	time.Sleep(3 * recheck)
	if n := records(id); n != 1 {
		t.Errorf("records of %s after %v of re-checks: %d, want 1 (the removal mark)", id, 3*recheck, n)
	}
	if s, err := b.Records.Load(ctx, id); err != nil || s.Public != nil || len(s.Links) != 0 {
		t.Errorf("settings of a removed sandbox: %+v %v, want none", s, err)
	}

	// A DELETE before a wake begins does not fail it: on the other
	// replica, then on the same one.
	if _, err := b.Ensure(ctx, id, tpl); err != nil {
		t.Fatalf("create on b after a's DELETE: %v", err)
	}
	if err := b.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Ensure(ctx, id, tpl); err != nil {
		t.Fatalf("create on b after b's DELETE: %v", err)
	}
	if n := running(id); n != 1 {
		t.Errorf("after the last create: %d instances of %s, want 1", n, id)
	}

	// A wake begun before a DELETE fails, but leaves alone the instance
	// a wake begun after it made (a's, here): it removes only what it
	// made itself.
	id2 := newID()
	var aerr error
	_, err = b.EnsureWith(ctx, id2, tpl, sandboxmgr.Options{OnCreate: func() error {
		if err := a.Remove(ctx, id2); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("DELETE on a: %v", err)
		}
		_, aerr = a.Ensure(ctx, id2, tpl)
		return nil
	}})
	if aerr != nil {
		t.Fatalf("a's create after its DELETE: %v", aerr)
	}
	if !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("b's wake begun before a's DELETE: got %v, want ErrNoContainer", err)
	}
	if n := running(id2); n != 1 {
		t.Errorf("after b's wake failed: %d instances of %s, want a's 1", n, id2)
	}
}

func TestDockerRemovalTwoReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tpl := testTemplate(t, nil)
	e.cfg.Templates = func(string) *config.Template { return tpl }
	e.cfg.RecheckEvery = 300 * time.Millisecond
	removeScoped(t, e, e.cfg.Labels) // registered first: runs after the managers close
	a, b := e.manager(t), e.manager(t)
	removalTwoReplicas(t, a, b, tpl, e.cfg.RecheckEvery, func(id string) int {
		return len(e.containers(t, id))
	}, func(id string) int {
		list, err := e.rt.Records.ListRecords(context.Background(), map[string]string{records.LabelRecord: id})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	})
}

// removeScoped removes the containers carrying labels (a test's scope)
// when t ends.
func removeScoped(t *testing.T, e *env, labels map[string]string) {
	t.Cleanup(func() {
		ctx := context.Background()
		f := filters.NewArgs()
		for k, v := range labels {
			f.Add("label", k+"="+v)
		}
		if cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
			for _, c := range cs {
				_ = e.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
		}
	})
}

func TestKubernetesRemovalTwoReplicas(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	cfg := e.config()
	cfg.Templates = func(string) *config.Template { return tpl }
	cfg.RecheckEvery = 300 * time.Millisecond
	a, b := e.manager(t, cfg), e.manager(t, cfg)
	removalTwoReplicas(t, a, b, tpl, cfg.RecheckEvery, func(id string) int {
		return len(e.pods(t, id))
	}, func(id string) int {
		list, err := e.cs.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: records.LabelRecord + "=" + id})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	})
}
