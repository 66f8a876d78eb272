package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/config"
)

// The warm pool on Kubernetes: a claim is a label update guarded by the
// pod's resourceVersion, undone if the claimer loses the sandbox's Lease.

// Rename claims pool pod container for the sandbox named name.
func (e *Runtime) Claim(ctx context.Context, container, name string) error {
	id, ok := strings.CutPrefix(name, "previewgate-")
	if !ok || !config.ValidID(id) {
		return fmt.Errorf("claim %s: not a sandbox name", name)
	}
	var pod *corev1.Pod
	for attempt := 0; ; attempt++ {
		p, err := e.podByID(ctx, container)
		if err != nil {
			return err
		}
		if p.Labels[LabelClaimed] != "" || p.DeletionTimestamp != nil {
			return fmt.Errorf("pool pod %s: %w (claimed by another replica)", p.Name, ErrNoContainer)
		}
		p.Labels[LabelClaimed] = id
		p.Labels[LabelSandbox] = id
		// Update carries the resourceVersion read above: of two replicas
		// claiming this pod, one gets a conflict.
		pod, err = e.cs.CoreV1().Pods(e.ns).Update(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt >= 3 {
			return kclassify("claim pod "+p.Name, err, ErrNoContainer)
		}
	}
	err := e.createLease(ctx, id, pod.Name)
	if errors.Is(err, errNameTaken) {
		var ok bool
		if ok, err = e.takeStaleLease(ctx, id, pod.Name); err == nil && !ok {
			err = fmt.Errorf("lease %s: %w", name, errNameTaken)
		}
	}
	if err != nil {
		e.unclaim(ctx, pod)
		return err
	}
	return nil
}

// unclaim gives a claimed pool pod back; a pod that cannot be given back is
// deleted, so it never serves a sandbox that another pod serves.
func (e *Runtime) unclaim(ctx context.Context, pod *corev1.Pod) {
	for range 3 {
		p := pod.DeepCopy()
		delete(p.Labels, LabelClaimed)
		delete(p.Labels, LabelSandbox)
		_, err := e.cs.CoreV1().Pods(e.ns).Update(ctx, p, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		if pod, err = e.podByID(ctx, kubeID(pod)); err != nil {
			return
		}
	}
	uid := pod.UID
	_ = e.cs.CoreV1().Pods(e.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}
