package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A pod's life: Start waits for the kubelet to run it; a stop deletes the
// pod and its lease, keeping the workspace; a remove deletes that too.

// Start waits until the pod runs (the kubelet starts it). A pod that
// ended is deleted: runtime.ErrNotFound, so the wake creates a new one.
func (e *Runtime) Start(ctx context.Context, id string) error {
	if _, _, ok := splitKeptID(id); ok {
		return fmt.Errorf("%s: %w (only its workspace is kept; create a pod)", id, runtime.ErrNotFound)
	}
	pod, err := e.podByID(ctx, id)
	for err == nil {
		switch podInfo(pod).State {
		case runtime.StateRunning:
			if pod.Status.PodIP != "" {
				return nil
			}
		case runtime.StateRemoving:
			return fmt.Errorf("pod %s is being deleted: %w", pod.Name, runtime.ErrNotFound)
		case runtime.StateExited:
			if err := e.deletePod(ctx, pod); err != nil {
				return err
			}
			return fmt.Errorf("pod %s ended: %w", pod.Name, runtime.ErrNotFound)
		}
		pod, err = e.waitChange(ctx, pod)
	}
	return err
}

// waitChange watches pod until its next change and returns it.
func (e *Runtime) waitChange(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	w, err := e.cs.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + pod.Name,
		ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		return nil, kclassify("watch pod "+pod.Name, err, runtime.ErrNotFound)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for pod %s: %w", pod.Name, context.Cause(ctx))
		case ev, ok := <-w.ResultChan():
			if !ok {
				return e.podByID(ctx, kubeID(pod)) // the watch ended: look again
			}
			p, isPod := ev.Object.(*corev1.Pod)
			switch {
			case ev.Type == watch.Error:
				return e.podByID(ctx, kubeID(pod))
			case !isPod || p.UID != pod.UID:
				continue
			case ev.Type == watch.Deleted:
				return nil, fmt.Errorf("pod %s: %w (deleted)", pod.Name, runtime.ErrNotFound)
			}
			return p, nil
		}
	}
}

// Resume does nothing: pods never pause.
func (e *Runtime) Resume(context.Context, string) error { return nil }

// Sleep deletes the pod whatever the mode (a pod cannot be frozen); its
// workspace, if any, is kept.
func (e *Runtime) Sleep(ctx context.Context, id string, _ runtime.SleepMode) error {
	if _, _, ok := splitKeptID(id); ok {
		return nil // stopped already
	}
	pod, err := e.podByID(ctx, id)
	if err != nil {
		return err
	}
	return e.stopPod(ctx, pod)
}

// Remove deletes the pod and its workspace, or a kept workspace.
func (e *Runtime) Remove(ctx context.Context, id string) error {
	if claim, uid, ok := splitKeptID(id); ok {
		return e.deleteWorkspace(ctx, claim, uid)
	}
	pod, err := e.podByID(ctx, id)
	if err != nil {
		return err
	}
	return e.removePod(ctx, pod)
}

// deletePod deletes pod (by UID), then its sandbox's lease if it still
// names it; a lease a killed gateway left is taken over (takeStaleLease).
func (e *Runtime) deletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsConflict(err) {
		if err := kclassify("delete pod "+pod.Name, err, runtime.ErrNotFound); !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
	}
	id := pod.Labels[LabelClaimed]
	if id == "" && pod.Labels[runtime.LabelPool] == "" {
		id = pod.Labels[runtime.LabelSandbox]
	}
	if id == "" {
		return nil
	}
	return e.deleteLease(ctx, logicalName(pod), pod.Name)
}

// deleteLease deletes lease if it still names holder, guarded by its
// resourceVersion so a lease another pod took stays; a conflict from an
// activity write is retried with the new version (#26).
func (e *Runtime) deleteLease(ctx context.Context, lease, holder string) error {
	for range 5 {
		cur, rv, err := e.leaseHolder(ctx, lease)
		if err != nil || cur != holder {
			return nil // gone already, or another pod's now
		}
		err = e.cs.CoordinationV1().Leases(e.ns).Delete(ctx, lease, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return kclassify("delete lease "+lease, err, nil)
		}
	}
	return nil // still changing: the sweep deletes it once its pod is gone (sweep.go)
}

// stopPod records the stop on pod's workspace claim, if any, then deletes
// it (the annotation only counts once the pod is gone).
func (e *Runtime) stopPod(ctx context.Context, pod *corev1.Pod) error {
	if claim := workspaceClaim(pod); claim != "" {
		now := time.Now()
		if err := e.annotateStopped(ctx, claim, &now); err != nil {
			return err
		}
	}
	return e.deletePod(ctx, pod)
}

func (e *Runtime) removePod(ctx context.Context, pod *corev1.Pod) error {
	if err := e.deletePod(ctx, pod); err != nil {
		return err
	}
	if claim := workspaceClaim(pod); claim != "" {
		if err := e.deleteWorkspace(ctx, claim, ""); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
	}
	return nil
}
