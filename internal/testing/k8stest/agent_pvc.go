package k8stest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// PersistentVolumeClaims, as the agent stands in for a provisioner, the
// attach/detach machinery and the pvc-protection controller (TEST CODE):
//
//   - a claim is backed by a Docker named volume k8stest-pvc-<claim UID>,
//     labelled with dockertest.Labels(), made when a pod first mounts it
//     (a claim deleted and made again under the same name is a new, empty
//     volume); the claim is reported Bound;
//   - a pod's persistentVolumeClaim volumes are mounted at their
//     mountPaths (no copy of the image's files into them, as a kubelet);
//     the pod's fsGroup owns the volume's root (group-writable, setgid)
//     and is added to the container's groups;
//   - a pod whose claim is missing or being deleted stays Pending;
//   - a claim being deleted loses its kubernetes.io/pvc-protection
//     finalizer once no pod uses it; its volume is removed once it is
//     gone, and every volume when the agent stops.

const (
	pvcKeyPrefix  = "pvc:"
	pvcProtection = "kubernetes.io/pvc-protection"
	labelPVC      = "previewgate.test.pvc"
)

// Volumes counts the Docker volumes backing claims now.
func (a *Agent) Volumes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.vols)
}

// podMounts returns the Docker mounts of c's claim volumes in pod and the
// group that must own them (nil: none).
func (a *Agent) podMounts(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]mount.Mount, *int64, error) {
	claims := map[string]string{} // volume name → claim
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.Name] = v.PersistentVolumeClaim.ClaimName
		}
	}
	var out []mount.Mount
	for _, vm := range c.VolumeMounts {
		claim, ok := claims[vm.Name]
		if !ok {
			continue // emptyDir and the like: not implemented
		}
		vol, err := a.volumeFor(ctx, claim)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, mount.Mount{Type: mount.TypeVolume, Source: vol, Target: vm.MountPath,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
	}
	var gid *int64
	if sc := pod.Spec.SecurityContext; sc != nil && len(out) > 0 {
		gid = sc.FSGroup
	}
	return out, gid, nil
}

// volumeFor returns the Docker volume backing claim, making it if needed.
func (a *Agent) volumeFor(ctx context.Context, claim string) (string, error) {
	pvc, err := a.cs.CoreV1().PersistentVolumeClaims(a.ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("claim %s: %w", claim, err)
	}
	if pvc.DeletionTimestamp != nil {
		return "", fmt.Errorf("claim %s is being deleted", claim)
	}
	name := "k8stest-pvc-" + string(pvc.UID)
	lbls := dockertest.Labels()
	lbls[labelPVC] = string(pvc.UID)
	if _, err := a.docker.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: lbls}); err != nil {
		return "", fmt.Errorf("volume for claim %s: %w", claim, err)
	}
	a.mu.Lock()
	a.vols[pvc.UID] = name
	a.mu.Unlock()
	return name, nil
}

// applyFSGroup makes gid own the root of every mount of created (not yet
// started) container ctrID, writable by the group, as a kubelet does for a
// pod's fsGroup. Docker has no such option: it extracts a directory entry
// with that owner over the mount point.
func (a *Agent) applyFSGroup(ctx context.Context, ctrID string, mounts []mount.Mount, gid int64) error {
	for _, m := range mounts {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		hdr := &tar.Header{Name: path.Base(m.Target) + "/", Typeflag: tar.TypeDir, Mode: 0o2775, Gid: int(gid)}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if err := tw.Close(); err != nil {
			return err
		}
		err := a.docker.CopyToContainer(ctx, ctrID, path.Dir(m.Target), &buf, container.CopyToContainerOptions{CopyUIDGID: true})
		if err != nil {
			return fmt.Errorf("fsGroup %d on %s: %w", gid, m.Target, err)
		}
	}
	return nil
}

// syncPVC binds claim, or lets it go once no pod uses it, and removes the
// volumes of claims that are gone.
func (a *Agent) syncPVC(ctx context.Context, claim string, pvcs corelisters.PersistentVolumeClaimLister, pods corelisters.PodLister) error {
	pvc, err := pvcs.PersistentVolumeClaims(a.ns).Get(claim)
	if apierrors.IsNotFound(err) {
		return a.removeVolumes(ctx, pvcs)
	}
	if err != nil {
		return err
	}
	pvc = pvc.DeepCopy()
	switch {
	case pvc.DeletionTimestamp != nil:
		if !slices.Contains(pvc.Finalizers, pvcProtection) || claimInUse(pods, a.ns, claim) {
			return nil // a pod's removal queues it again
		}
		pvc.Finalizers = slices.DeleteFunc(pvc.Finalizers, func(f string) bool { return f == pvcProtection })
		_, err := a.cs.CoreV1().PersistentVolumeClaims(a.ns).Update(ctx, pvc, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // the informer brings the change back
		}
		return err
	case pvc.Status.Phase != corev1.ClaimBound:
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.AccessModes = pvc.Spec.AccessModes
		pvc.Status.Capacity = pvc.Spec.Resources.Requests
		_, err := a.cs.CoreV1().PersistentVolumeClaims(a.ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	return nil
}

func claimInUse(pods corelisters.PodLister, ns, claim string) bool {
	list, _ := pods.Pods(ns).List(labels.Everything())
	for _, p := range list {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				return true
			}
		}
	}
	return false
}

// requeueDeletedClaims queues every claim being deleted (a pod that used
// one went).
func (a *Agent) requeueDeletedClaims(pvcs corelisters.PersistentVolumeClaimLister) {
	list, _ := pvcs.PersistentVolumeClaims(a.ns).List(labels.Everything())
	for _, p := range list {
		if p.DeletionTimestamp != nil {
			a.queue.Add(pvcKeyPrefix + p.Name)
		}
	}
}

// removeVolumes removes the volumes of claims that no longer exist.
func (a *Agent) removeVolumes(ctx context.Context, pvcs corelisters.PersistentVolumeClaimLister) error {
	list, err := pvcs.PersistentVolumeClaims(a.ns).List(labels.Everything())
	if err != nil {
		return err
	}
	live := make(map[types.UID]bool, len(list))
	for _, p := range list {
		live[p.UID] = true
	}
	a.mu.Lock()
	gone := map[types.UID]string{}
	for uid, name := range a.vols {
		if !live[uid] {
			gone[uid] = name
		}
	}
	a.mu.Unlock()
	for uid, name := range gone {
		if err := a.docker.VolumeRemove(ctx, name, false); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove volume %s: %w", name, err)
		}
		a.mu.Lock()
		delete(a.vols, uid)
		a.mu.Unlock()
	}
	return nil
}

// removeAllVolumes removes every volume the agent made (when it stops,
// after the containers).
func (a *Agent) removeAllVolumes() {
	a.mu.Lock()
	names := make([]string, 0, len(a.vols))
	for _, n := range a.vols {
		names = append(names, n)
	}
	a.vols = map[types.UID]string{}
	a.mu.Unlock()
	for _, n := range names {
		if err := a.docker.VolumeRemove(context.Background(), n, true); err != nil && !cerrdefs.IsNotFound(err) {
			a.t.Logf("agent: remove volume %s: %v", n, err)
		}
	}
}
