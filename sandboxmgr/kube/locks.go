package kube

import (
	"context"
	"maps"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// LabelLock marks a Lease that is a replicas' lock (runtime.Locks), not a
// sandbox's: the sweep leaves it alone.
const LabelLock = "previewgate.lock"

// Hold takes or renews the Lease previewgate.lock.<scope stamp>.<key> for
// holder (#26: one replica per scope fills the warm pool). Every write is
// guarded by the resourceVersion, so two replicas never both hold it.
func (e *Runtime) Hold(ctx context.Context, key, holder string, ttl time.Duration) (bool, error) {
	// Dots: no sandbox's Lease can have this name (ids have none).
	name := "previewgate.lock." + runtime.Stamp(e.base) + "." + key
	leases := e.cs.CoordinationV1().Leases(e.ns)
	now := metav1.NowMicro()
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lbls := maps.Clone(e.base)
		lbls[runtime.LabelManaged], lbls[LabelLock] = "true", key
		secs := int32(ttl / time.Second)
		_, err = leases.Create(ctx, &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
			Spec:       coordv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &now, RenewTime: &now, LeaseDurationSeconds: &secs},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, kclassify("create lease "+name, err, nil)
	}
	if err != nil {
		return false, kclassify("get lease "+name, err, nil)
	}
	cur := holderOf(l)
	if cur != holder && leaseAge(l) < ttl {
		return false, nil
	}
	if cur != holder {
		l.Spec.AcquireTime = &now
	}
	l.Spec.HolderIdentity, l.Spec.RenewTime = &holder, &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return false, nil // another replica wrote it first
	}
	return err == nil, kclassify("update lease "+name, err, nil)
}
