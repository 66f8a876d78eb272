package sandboxmgr_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/previewgate/previewgate/config"
)

// holdFinalizer keeps a deleted pod in the API, terminating, until the
// test removes it: a kubelet slow to end a pod, under the test's control.
const holdFinalizer = "previewgate.test/hold"

// A gateway that starts while a stopped sandbox's pod still terminates
// counts remove_after from the stop recorded on the workspace claim, as
// it does once the pod is gone (TestKubernetesWorkspaceKeptAcrossStops),
// not from when it sees the pod end. The stop is moved an hour back, so
// with remove_after 10m the claim is overdue as soon as the pod is gone;
// counted from the pod's end it would stay 10 minutes, far past the wait
// (no wall-clock bound on the removal itself). The restarted gateway
// used to take the pod's end for a stop happening then.
func TestKubernetesRestartWhileStoppedPodTerminates(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	ctx := t.Context()
	tpl := workspaceTemplate(t)
	tpl.RemoveAfter = config.Duration(time.Hour)
	var cur atomic.Pointer[config.Template]
	cur.Store(tpl)
	cfg := e.config()
	cfg.ReapEvery = 200 * time.Millisecond
	cfg.Templates = func(string) *config.Template { return cur.Load() }
	m := e.manager(t, cfg)
	id := newID()
	if _, err := m.Ensure(ctx, id, tpl); err != nil {
		t.Fatalf("Ensure: %v", err)
	}

	// The pod is held once deleted; let go at the end whatever happens,
	// so the namespace can go.
	pods := e.cs.CoreV1().Pods(e.ns)
	name := e.name(id)
	hold := func(ctx context.Context, on bool) error {
		finalizers := `null`
		if on {
			finalizers = `["` + holdFinalizer + `"]`
		}
		patch := []byte(`{"metadata":{"finalizers":` + finalizers + `}}`)
		_, err := pods.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	if err := hold(ctx, true); err != nil {
		t.Fatalf("holding the pod: %v", err)
	}
	t.Cleanup(func() {
		if err := hold(context.Background(), false); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("letting the pod go: %v", err)
		}
	})

	// Stop: the stop is recorded on the claim and the pod deleted; the
	// pod stays, terminating.
	if err := m.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("after the stop got pod %v (%v), want it there, being deleted", pod, err)
	}
	e.backdateStop(t, id, time.Hour)
	m.Close()

	// A new gateway starts while the pod terminates, then the pod goes.
	c := *tpl
	c.RemoveAfter = config.Duration(10 * time.Minute)
	cur.Store(&c)
	e.manager(t, cfg) // the restarted gateway
	if err := hold(ctx, false); err != nil {
		t.Fatalf("letting the pod go: %v", err)
	}
	waitWithin(t, 20*time.Second, "the stopped pod of "+id+" gone", func() bool {
		_, err := pods.Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// Not asked whether m2 lists it "exited" now: the reaper (every
	// 200ms) may have removed it already, which is the point.
	started := time.Now()
	e.waitNoClaim(t, id, 20*time.Second)
	t.Logf("restarted gateway removed the workspace %v after the pod went (stopped an hour before, remove_after 10m)",
		time.Since(started).Round(100*time.Millisecond))
}
