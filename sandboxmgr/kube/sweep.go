package kube

import (
	"context"
	"log/slog"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The lease sweep (#26: no object outlives its sandbox). A gateway killed
// mid-delete, or a delete that kept losing to activity writes, leaves a
// lease naming a gone pod. Every replica deletes the leases of its scope
// whose holder pod is gone and that nobody renewed for leaseCreateGrace
// (not a create in flight), guarded by the resourceVersion. Kept
// workspaces have no lease.

// sweepLoop sweeps every Config.SweepEvery until ctx ends.
func (e *Runtime) sweepLoop(ctx context.Context, lbls map[string]string, log *slog.Logger) {
	t := time.NewTicker(e.kc.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, e.kc.SweepEvery)
		n, err := e.sweepLeases(sctx, lbls)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			log.DebugContext(ctx, "lease sweep failed", "err", err)
		case n > 0:
			log.InfoContext(ctx, "deleted leases whose pods are gone", "count", n)
		}
	}
}

// sweepLeases deletes the stale leases of the scope lbls and returns how
// many.
func (e *Runtime) sweepLeases(ctx context.Context, lbls map[string]string) (int, error) {
	sel := labels.SelectorFromSet(lbls).String()
	leases, err := e.cs.CoordinationV1().Leases(e.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return 0, kclassify("list leases", err, nil)
	}
	pods, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return 0, kclassify("list pods", err, nil)
	}
	live := make(map[string]bool, len(pods.Items))
	for i := range pods.Items {
		live[pods.Items[i].Name] = true
	}
	n := 0
	for i := range leases.Items {
		l := &leases.Items[i]
		if l.Labels[LabelLock] != "" || !staleLease(l, live) {
			continue
		}
		rv := l.ResourceVersion
		err := e.cs.CoordinationV1().Leases(e.ns).Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case err == nil:
			n++
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// gone, or renewed meanwhile: the next sweep looks again
		default:
			return n, kclassify("delete lease "+l.Name, err, nil)
		}
	}
	return n, nil
}

// staleLease reports a lease whose holder pod is not among live and that
// nobody acquired or renewed for leaseCreateGrace.
func staleLease(l *coordv1.Lease, live map[string]bool) bool {
	return !live[holderOf(l)] && leaseAge(l) >= leaseCreateGrace

}
