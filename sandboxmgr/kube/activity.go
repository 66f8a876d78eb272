package kube

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// RecordActivity writes at into the renewTime of sandbox name's Lease (a
// merge patch, no read). Replicas write their own view, so it may step
// back by at most ActivityEvery, far below idle_timeout.
func (e *Runtime) RecordActivity(ctx context.Context, name string, at time.Time) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"renewTime": metav1.NewMicroTime(at)}})
	if err != nil {
		return err
	}
	_, err = e.cs.CoordinationV1().Leases(e.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil // stopped meanwhile
	}
	return kclassify("record activity "+name, err, nil)
}

// RecordEvery is how often a replica publishes a sandbox's activity.
func (e *Runtime) RecordEvery() time.Duration { return e.kc.ActivityEvery }

// LastActivity reads the renewTime of the Lease of instance inst.
func (e *Runtime) LastActivity(ctx context.Context, _ string, inst runtime.Instance) (time.Time, error) {
	l, err := e.cs.CoordinationV1().Leases(e.ns).Get(ctx, inst.Name, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, kclassify("get lease "+inst.Name, err, runtime.ErrNotFound)
	}
	switch {
	case l.Spec.RenewTime != nil:
		return l.Spec.RenewTime.Time, nil
	case l.Spec.AcquireTime != nil:
		return l.Spec.AcquireTime.Time, nil
	}
	return time.Time{}, errors.New("lease has no renew time")
}
