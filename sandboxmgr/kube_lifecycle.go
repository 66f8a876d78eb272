package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A pod's life on Kubernetes: Start waits for the kubelet to run it; a
// stop deletes the pod (and its lease) and keeps the workspace; a remove
// deletes the workspace too.

// Start waits until the pod runs (the kubelet starts it; there is nothing to
// call). A pod that ended is deleted: ErrNoContainer, so the wake creates a
// new one.
func (e *kubeEngine) Start(ctx context.Context, id string) error {
	if _, _, ok := splitKeptID(id); ok {
		return fmt.Errorf("%s: %w (only its workspace is kept; create a pod)", id, ErrNoContainer)
	}
	pod, err := e.podByID(ctx, id)
	for err == nil {
		switch podInfo(pod).State {
		case stateRunning:
			if pod.Status.PodIP != "" {
				return nil
			}
		case stateRemoving:
			return fmt.Errorf("pod %s is being deleted: %w", pod.Name, ErrNoContainer)
		case stateExited:
			if err := e.deletePod(ctx, pod); err != nil {
				return err
			}
			return fmt.Errorf("pod %s ended: %w", pod.Name, ErrNoContainer)
		}
		pod, err = e.waitChange(ctx, pod)
	}
	return err
}

// waitChange watches pod until its next change and returns it.
func (e *kubeEngine) waitChange(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	w, err := e.cs.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + pod.Name,
		ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		return nil, kclassify("watch pod "+pod.Name, err, ErrNoContainer)
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
				return nil, fmt.Errorf("pod %s: %w (deleted)", pod.Name, ErrNoContainer)
			}
			return p, nil
		}
	}
}

func (e *kubeEngine) Unpause(context.Context, string) error { return nil } // pods never pause

// Pause stops: Kubernetes cannot freeze a pod and keep its memory.
func (e *kubeEngine) Pause(ctx context.Context, id string) error { return e.Stop(ctx, id) }

// Stop deletes the pod; its workspace, if any, is kept (kube_workspace.go).
func (e *kubeEngine) Stop(ctx context.Context, id string) error {
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
func (e *kubeEngine) Remove(ctx context.Context, id string) error {
	if claim, uid, ok := splitKeptID(id); ok {
		return e.deleteWorkspace(ctx, claim, uid)
	}
	pod, err := e.podByID(ctx, id)
	if err != nil {
		return err
	}
	return e.removePod(ctx, pod)
}

// deletePod deletes pod (by UID) and then its sandbox's lease if the lease
// still names it. A gateway killed in between leaves a lease naming a
// missing pod, which the next create takes over (takeStaleLease).
func (e *kubeEngine) deletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsConflict(err) {
		if err := kclassify("delete pod "+pod.Name, err, ErrNoContainer); !errors.Is(err, ErrNoContainer) {
			return err
		}
	}
	id := pod.Labels[LabelClaimed]
	if id == "" && pod.Labels[LabelPool] == "" {
		id = pod.Labels[LabelSandbox]
	}
	if id == "" {
		return nil
	}
	holder, rv, err := e.leaseHolder(ctx, id)
	if err != nil || holder != pod.Name {
		return nil // gone already, or another pod's now
	}
	err = e.cs.CoordinationV1().Leases(e.ns).Delete(ctx, ContainerName(id), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return kclassify("delete lease "+ContainerName(id), err, nil)
	}
	return nil
}

// stopPod deletes pod, first recording the stop on its workspace claim
// (if it has one): a gateway dying in between leaves a running pod with
// the annotation, which only counts once the pod is gone, and the next
// stop writes it again.
func (e *kubeEngine) stopPod(ctx context.Context, pod *corev1.Pod) error {
	if claim := workspaceClaim(pod); claim != "" {
		now := time.Now()
		if err := e.annotateStopped(ctx, claim, &now); err != nil {
			return err
		}
	}
	return e.deletePod(ctx, pod)
}

// removePod deletes pod and then its workspace claim (if it has one).
func (e *kubeEngine) removePod(ctx context.Context, pod *corev1.Pod) error {
	if err := e.deletePod(ctx, pod); err != nil {
		return err
	}
	if claim := workspaceClaim(pod); claim != "" {
		if err := e.deleteWorkspace(ctx, claim, ""); err != nil && !errors.Is(err, ErrNoContainer) {
			return err
		}
	}
	return nil
}
