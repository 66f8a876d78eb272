package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Workspaces (#15): a sandbox whose template has one gets a
// PersistentVolumeClaim named like its pod, with its labels, mounted in
// every pod of the sandbox:
//   - Create makes the claim before the Lease and the pod; an existing one
//     (kept, or a racing replica's) is used as it is, one being deleted
//     is waited out.
//   - Stop deletes the pod only, after writing previewgate.stopped-at on
//     the claim; a new pod on it clears that.
//   - A claim without a pod is a stopped sandbox: Lookup and List report
//     it Kept, exited, so the reaper removes it after remove_after
//     (counted from the annotation) and a wake makes a new pod on it. The
//     informer reports such a pod's deletion as EventKept. List reports a
//     pod still being deleted with its claim's StoppedAt.
//   - Remove deletes the pod, then the claim.
//   - The warm pool serves no template with a workspace (config refuses
//     it): a pool pod runs before it knows whose claim to mount.
// A claim the gateway may not read or list (an old Role) counts as absent.

const (
	// annStoppedAt on a workspace claim: when a gateway last stopped its
	// sandbox (RFC 3339), absent while a pod runs on it.
	annStoppedAt    = "previewgate.stopped-at"
	workspaceVolume = "workspace"
	// keptPrefix starts the "container ID" of a kept workspace:
	// "pvc:<claim name>/<claim UID>".
	keptPrefix = "pvc:"
)

// splitKeptID splits a kept workspace's ID; ok is false for a pod's.
func splitKeptID(id string) (claim string, uid types.UID, ok bool) {
	rest, ok := strings.CutPrefix(id, keptPrefix)
	if !ok {
		return "", "", false
	}
	claim, uid = splitKubeID(rest)
	return claim, uid, true
}

// workspaceClaim is the claim pod mounts as its workspace, "" if none.
func workspaceClaim(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == workspaceVolume && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// keptInfo reports a workspace claim without its pod as a stopped sandbox.
func keptInfo(pvc *corev1.PersistentVolumeClaim) runtime.Instance {
	c := runtime.Instance{
		ID:      keptPrefix + pvc.Name + "/" + string(pvc.UID),
		Name:    pvc.Name,
		Labels:  maps.Clone(pvc.Labels),
		State:   runtime.StateExited,
		Created: pvc.CreationTimestamp.Time,
		Kept:    true,
	}
	c.StoppedAt = stoppedAt(pvc)
	return c
}

func (e *Runtime) workspaceSpec(s runtime.Spec) *corev1.PersistentVolumeClaim {
	w := s.Workspace
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: e.ns, Labels: maps.Clone(s.Labels)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: *resourceBytes(int64(w.Size))},
			},
		},
	}
	if w.StorageClass != "" {
		sc := w.StorageClass
		pvc.Spec.StorageClassName = &sc
	}
	return pvc
}

// ensureWorkspace makes s's claim or takes the kept one, which must be this
// gateway's (runtime.ErrForeign); one being deleted is waited for.
func (e *Runtime) ensureWorkspace(ctx context.Context, s runtime.Spec) error {
	pvc := e.workspaceSpec(s)
	for {
		_, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return kclassify("create workspace "+s.Name, err, nil)
		}
		cur, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, s.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue // deleted meanwhile: make a new one
		case err != nil:
			return kclassify("get workspace "+s.Name, err, nil)
		case !e.ownsWorkspace(cur, s.Labels[runtime.LabelSandbox]):
			return fmt.Errorf("workspace %s: %w (it lacks this gateway's labels)", s.Name, runtime.ErrForeign)
		case cur.DeletionTimestamp != nil:
			// Removed a moment ago; its pod goes first, then the claim.
			if err := runtime.Sleep(ctx, 100*time.Millisecond); err != nil {
				return fmt.Errorf("workspace %s is being deleted: %w", s.Name, err)
			}
			continue
		}
		if _, ok := cur.Annotations[annStoppedAt]; !ok {
			return nil
		}
		return e.annotateStopped(ctx, s.Name, nil)
	}
}

// ownsWorkspace reports whether pvc carries the manager's scope labels
// (which are in e.base) and is sandbox id's.
func (e *Runtime) ownsWorkspace(pvc *corev1.PersistentVolumeClaim, id string) bool {
	for k, v := range e.base {
		if pvc.Labels[k] != v {
			return false
		}
	}
	return pvc.Labels[runtime.LabelManaged] == "true" && pvc.Labels[runtime.LabelSandbox] == id
}

// annotateStopped sets (at non-nil) or clears the stop time on claim. A
// claim that is gone needs neither.
func (e *Runtime) annotateStopped(ctx context.Context, claim string, at *time.Time) error {
	var v any // null removes the annotation in a merge patch
	if at != nil {
		v = at.UTC().Format(time.RFC3339Nano)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{annStoppedAt: v}}})
	if err != nil {
		return err
	}
	_, err = e.cs.CoreV1().PersistentVolumeClaims(e.ns).Patch(ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return kclassify("annotate workspace "+claim, err, nil)
}

// keptWorkspace returns claim name as a stopped sandbox; runtime.ErrNotFound
// if none, being deleted, or not uid (when given).
func (e *Runtime) keptWorkspace(ctx context.Context, name string, uid types.UID) (runtime.Instance, error) {
	pvc, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return runtime.Instance{}, fmt.Errorf("workspace %s: %w", name, runtime.ErrNotFound)
	case err != nil:
		return runtime.Instance{}, kclassify("get workspace "+name, err, runtime.ErrNotFound)
	case pvc.DeletionTimestamp != nil:
		return runtime.Instance{}, fmt.Errorf("workspace %s: %w (being deleted)", name, runtime.ErrNotFound)
	case uid != "" && pvc.UID != uid:
		return runtime.Instance{}, fmt.Errorf("workspace %s: %w (replaced)", name, runtime.ErrNotFound)
	}
	return keptInfo(pvc), nil
}

// listKept returns the scoped claims no pod in pods uses, and the stops
// recorded on those one does (a pod being deleted there: a stop under way).
func (e *Runtime) listKept(ctx context.Context, lbls map[string]string, pods []runtime.Instance) (kept []runtime.Instance, stops map[string]time.Time, err error) {
	list, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(lbls).String()})
	if apierrors.IsForbidden(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, kclassify("list workspaces", err, nil)
	}
	served := make(map[string]bool, len(pods))
	for _, p := range pods {
		served[p.Name] = true
	}
	stops = make(map[string]time.Time)
	for i := range list.Items {
		pvc := &list.Items[i]
		switch {
		case pvc.DeletionTimestamp != nil: // removed: neither kept nor stopped
		case !served[pvc.Name]:
			kept = append(kept, keptInfo(pvc))
		default:
			if at := stoppedAt(pvc); !at.IsZero() {
				stops[pvc.Name] = at
			}
		}
	}
	return kept, stops, nil
}

// stoppedAt is the stop recorded on pvc (annStoppedAt); zero if none.
func stoppedAt(pvc *corev1.PersistentVolumeClaim) time.Time {
	t, err := time.Parse(time.RFC3339Nano, pvc.Annotations[annStoppedAt])
	if err != nil {
		return time.Time{}
	}
	return t
}

// deleteWorkspace deletes claim (only uid's, if given); runtime.ErrNotFound
// if it is gone or replaced.
func (e *Runtime) deleteWorkspace(ctx context.Context, claim string, uid types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, claim, opts)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("workspace %s: %w (replaced)", claim, runtime.ErrNotFound)
	}
	return kclassify("delete workspace "+claim, err, runtime.ErrNotFound)
}
