package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The pod spec, and the per-sandbox Lease that locks an id across replicas
// and records its activity.

func (e *Runtime) podSpec(s runtime.Spec, port int, readyPath string) *corev1.Pod {
	no, yes := false, true
	var env []corev1.EnvVar
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Privileged:               &no,
		ReadOnlyRootFilesystem:   &s.ReadOnly,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for _, c := range s.CapAdd {
		sc.Capabilities.Add = append(sc.Capabilities.Add, corev1.Capability(strings.TrimPrefix(strings.ToUpper(c), "CAP_")))
	}
	if e.kc.RunAsUser > 0 {
		uid := e.kc.RunAsUser
		sc.RunAsUser, sc.RunAsGroup, sc.RunAsNonRoot = &uid, &uid, &yes
	}
	res := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	if s.Memory > 0 {
		q := *resourceBytes(s.Memory)
		res.Limits[corev1.ResourceMemory], res.Requests[corev1.ResourceMemory] = q, q
	}
	if s.CPUs > 0 {
		res.Limits[corev1.ResourceCPU] = *resourceMilli(int64(s.CPUs * 1000))
		// A dev server idles most of its life: request a quarter.
		res.Requests[corev1.ResourceCPU] = *resourceMilli(max(int64(s.CPUs*250), 10))
	}
	probe := &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intOrString(port)}}}
	if readyPath != "" {
		probe.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: readyPath, Port: intOrString(port)}}
	}
	grace := int64(5)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: e.ns, Labels: maps.Clone(s.Labels)},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            kubeContainer,
				Image:           s.Image,
				Args:            s.Cmd,
				Env:             env,
				Ports:           []corev1.ContainerPort{{Name: "app", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}},
				Resources:       res,
				ReadinessProbe:  probe,
				SecurityContext: sc,
			}},
		},
	}
	if s.ReadOnly {
		pod.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
	}
	if s.Workspace != nil {
		e.mountWorkspace(pod, s)
	}
	return pod
}

// mountWorkspace mounts s's claim at the workspace path, writable by the
// sandbox's uid (fsGroup, changed only when the root does not have it, so
// a large workspace is not walked on every wake). With the image's own
// user (run_as_user -1) the image must see to it.
func (e *Runtime) mountWorkspace(pod *corev1.Pod, s runtime.Spec) {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.Name},
	}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: workspaceVolume, MountPath: s.Workspace.Path})
	if e.kc.RunAsUser > 0 {
		gid := e.kc.RunAsUser
		policy := corev1.FSGroupChangeOnRootMismatch
		pod.Spec.SecurityContext.FSGroup, pod.Spec.SecurityContext.FSGroupChangePolicy = &gid, &policy
	}
}

func resourceBytes(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.BinarySI) }

func resourceMilli(n int64) *resource.Quantity {
	return resource.NewMilliQuantity(n, resource.DecimalSI)
}

func intOrString(port int) intstr.IntOrString { return intstr.FromInt32(int32(port)) }

// takeLease creates sandbox id's lease naming holder, or takes it over if
// stale (takeStaleLease); runtime.ErrNameTaken if another holds it.
func (e *Runtime) takeLease(ctx context.Context, lease, id, holder string) error {
	now := metav1.NowMicro()
	labels := maps.Clone(e.base)
	labels[runtime.LabelManaged], labels[runtime.LabelSandbox] = "true", id
	l := &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lease, Namespace: e.ns, Labels: labels},
		Spec:       coordv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &now, RenewTime: &now},
	}
	_, err := e.cs.CoordinationV1().Leases(e.ns).Create(ctx, l, metav1.CreateOptions{})
	err = kclassify("create lease "+lease, err, nil)
	if errors.Is(err, runtime.ErrNameTaken) {
		var ok bool
		if ok, err = e.takeStaleLease(ctx, lease, id, holder); err == nil && !ok {
			err = fmt.Errorf("lease %s: %w", lease, runtime.ErrNameTaken)
		}
	}
	return err
}

// leaseHolder returns the pod named by lease ("" if there is no lease)
// and the lease's resourceVersion.
func (e *Runtime) leaseHolder(ctx context.Context, lease string) (holder, rv string, err error) {
	l, err := e.cs.CoordinationV1().Leases(e.ns).Get(ctx, lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", "", nil
	}
	if err != nil {
		return "", "", kclassify("get lease "+lease, err, nil)
	}
	return holderOf(l), l.ResourceVersion, nil
}

// holderOf is l's holderIdentity ("" if none).
func holderOf(l *coordv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// takeStaleLease makes id's existing lease name holder if the pod it names
// is not serving id: true if it names holder now. A pod is bound before or
// right after its lease is written, so a lease naming a missing or unbound
// pool pod was left by a gateway that died mid-claim or mid-delete; one
// naming the sandbox's own missing pod may be a create in flight, left for
// leaseCreateGrace.
func (e *Runtime) takeStaleLease(ctx context.Context, lease, id, holder string) (bool, error) {
	l, err := e.cs.CoordinationV1().Leases(e.ns).Get(ctx, lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil // deleted meanwhile: the caller's retry creates it
	}
	if err != nil {
		return false, kclassify("get lease "+lease, err, nil)
	}
	cur := holderOf(l)
	if cur == holder {
		return true, nil
	}
	if cur == lease {
		// Only a pool claimer gets here. A young lease without its pod is
		// a create in flight, not a dead creator: taking it over would
		// make a second pod.
		if _, err := e.getPod(ctx, cur); !errors.Is(err, runtime.ErrNotFound) {
			return false, err // it exists (or we cannot tell)
		}
		if leaseAge(l) < leaseCreateGrace {
			return false, nil
		}
	} else if p, err := e.getPod(ctx, cur); err == nil && p.Labels[LabelClaimed] == id && p.DeletionTimestamp == nil {
		return false, nil
	} else if err == nil && p.Labels[LabelClaimed] == "" && p.DeletionTimestamp == nil && leaseAge(l) < leaseCreateGrace {
		return false, nil // a claim in flight: the claimer binds the pod right after its Lease
	} else if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return false, err
	}
	l.Spec.HolderIdentity = &holder
	now := metav1.NowMicro()
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	_, err = e.cs.CoordinationV1().Leases(e.ns).Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return false, nil
	}
	return err == nil, kclassify("take lease "+l.Name, err, nil)
}

// leaseCreateGrace is how long a lease may name its sandbox's own missing
// pod before a pool claimer takes it over (a create takes milliseconds).
const leaseCreateGrace = 30 * time.Second

// leaseAge is how long ago l was last acquired or renewed (else created).
func leaseAge(l *coordv1.Lease) time.Duration {
	var t time.Time
	if l.Spec.AcquireTime != nil {
		t = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil && l.Spec.RenewTime.After(t) {
		t = l.Spec.RenewTime.Time
	}
	if t.IsZero() {
		t = l.CreationTimestamp.Time
	}
	return time.Since(t)
}
