package sandboxmgr_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestKubernetesSandboxIDCannotTakePoolLock (attack21): a sandbox's Lease
// was named previewgate-<id>, the replicas' pool lock previewgate-lock-pool,
// so the valid sandbox id "lock-pool" names the lock. A claim for that id
// finds "its" Lease taken, judges the holder (a replica id, not a pod)
// dead, and writes the pool pod's name into the lock: no replica fills the
// pool until the lock's TTL passes; then the filler writes its own id back
// into what is also the sandbox's claim Lease, and the sandbox's activity
// writes renew the lock for whichever replica holds it (a dead one too).
func TestKubernetesSandboxIDCannotTakePoolLock(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	tpl.Pool = 1
	cfg := e.config()
	cfg.PoolEvery = 100 * time.Millisecond
	cfg.RecheckEvery = 300 * time.Millisecond
	cfg.ListTemplates = func() []*config.Template { return []*config.Template{tpl} }
	cfg.Templates = func(string) *config.Template { return tpl }
	m1 := e.manager(t, cfg)
	deadline := time.Now().Add(60 * time.Second)
	for m1.PoolSize(tpl.Name) < tpl.Pool {
		if time.Now().After(deadline) {
			t.Fatal("pool not filled within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	leases := e.cs.CoordinationV1().Leases(e.ns)
	lockName := "previewgate.lock." + runtime.Stamp(e.labels) + ".pool"
	lock, err := leases.Get(t.Context(), lockName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pool lock: %v", err)
	}
	holder := *lock.Spec.HolderIdentity

	const id = "lock-pool" // a valid sandbox id
	if _, err := m1.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatalf("Ensure %s: %v", id, err)
	}
	lock, err = leases.Get(t.Context(), lockName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pool lock: %v", err)
	}
	if got := *lock.Spec.HolderIdentity; got != holder || lock.Labels[kube.LabelLock] == "" {
		t.Errorf("sandbox %q took the pool lock: holder %q (was %q), labels %v", id, got, holder, lock.Labels)
	}
}
