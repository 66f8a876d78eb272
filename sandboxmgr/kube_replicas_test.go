package sandboxmgr_test

import (
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestKubernetesReplicasAgreeOnShortIdle (#26, 2): a template with
// idle_timeout 8s and no other setting. The sandbox is made through
// replica A and then used only through replica B. A must never stop it
// while B serves it: the activity B publishes is derived from the idle
// timeout, not the 10 s default that is longer than it.
func TestKubernetesReplicasAgreeOnShortIdle(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	tpl.IdleTimeout = config.Duration(8 * time.Second)
	cfg := e.config()
	cfg.Templates = func(string) *config.Template { return tpl }
	a := e.manager(t, cfg)
	b := e.manager(t, cfg)
	id := newID()
	if _, err := a.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatal(err)
	}
	pods := e.pods(t, id)
	if len(pods) != 1 {
		t.Fatalf("got %d pods, want 1", len(pods))
	}
	uid := pods[0].UID
	end := time.Now().Add(30 * time.Second)
	for time.Now().Before(end) {
		if _, err := b.Ensure(t.Context(), id, tpl); err != nil {
			t.Fatal(err)
		}
		b.Sandbox(id).Touch()
		if p := e.pods(t, id); len(p) != 1 || p[0].UID != uid {
			t.Fatalf("after %v of traffic through B only, the pod was replaced or stopped (%d pods): A stopped a sandbox B serves",
				30*time.Second-time.Until(end), len(p))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestKubernetesAnyReplicaReaps (#26, 3): a pod that replica B learned
// only from its informer (A made it) is stopped idle by B once A is gone
// (scaled down): the record is rebuilt from the pod's labels, template
// included.
func TestKubernetesAnyReplicaReaps(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	tpl.IdleTimeout = config.Duration(3 * time.Second)
	cfg := e.config()
	cfg.ReapEvery = 200 * time.Millisecond
	cfg.RecheckEvery = -1 // the informer alone must teach B the template
	cfg.Templates = func(name string) *config.Template {
		if name == tpl.Name {
			return tpl
		}
		return nil
	}
	acfg := cfg
	acfg.ReapEvery = -1
	a, err := mgrtest.New(mgrtest.Config{Config: acfg.Config, Runtime: mgrtest.Runtime{Kube: &acfg.Kubernetes}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := e.manager(t, cfg) // running before the pod exists: learns it from events
	id := newID()
	if _, err := a.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatal(err)
	}
	a.Close() // scaled down
	if _, ok := b.Known(id); !ok {
		waitWithin(t, 10*time.Second, "B to learn the pod", func() bool { _, ok := b.Known(id); return ok })
	}
	e.waitNoPod(t, id, 30*time.Second)
}

// TestKubernetesLeaseSweep (#26, 4): a Lease whose pod is gone (a gateway
// killed between the two deletes, or a delete that lost to activity
// writes) is deleted by the sweep; a young one without its pod (a create
// in flight) is left alone.
func TestKubernetesLeaseSweep(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	cfg := e.config()
	cfg.Kubernetes.SweepEvery = 200 * time.Millisecond
	e.manager(t, cfg)
	stale, young := newID(), newID()
	old := metav1.NewMicroTime(time.Now().Add(-2 * time.Minute))
	now := metav1.NowMicro()
	for _, l := range []struct {
		id string
		at metav1.MicroTime
	}{{stale, old}, {young, now}} {
		holder := e.name(l.id)
		labels := map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: l.id}
		for k, v := range e.labels {
			labels[k] = v
		}
		_, err := e.cs.CoordinationV1().Leases(e.ns).Create(t.Context(), &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: holder, Labels: labels},
			Spec:       coordv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &l.at, RenewTime: &l.at},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitWithin(t, 20*time.Second, "the stale lease to be swept", func() bool {
		_, err := e.cs.CoordinationV1().Leases(e.ns).Get(t.Context(), e.name(stale), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := e.cs.CoordinationV1().Leases(e.ns).Get(t.Context(), e.name(young), metav1.GetOptions{}); err != nil {
		t.Fatalf("the young lease (a create in flight) was swept: %v", err)
	}
}
