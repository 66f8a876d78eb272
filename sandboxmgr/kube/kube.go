// Package kube is the Kubernetes runtime of the sandbox manager (#15).
// Pods, Leases, PersistentVolumeClaims, NetworkPolicies and "<pod>/<uid>"
// instance IDs stay in this package; the manager sees package runtime's
// Instances, Events and Capabilities.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A sandbox is a Pod; the API server is the truth.
//   - A sandbox's pod is named runtime.Name (a LegacyName one is used as
//     it is), carries the scope labels, and runs once (restartPolicy
//     Never): "stop" deletes it, the next wake creates it again. No pause.
//   - Every sandbox has a Lease named like its pod. Creating it is the
//     cluster-wide lock on the id (AlreadyExists is the race signal); its
//     holderIdentity names the serving pod, its renewTime the last
//     activity any replica recorded (activity.go).
//   - A pool pod is claimed by a label change (LabelClaimed) guarded by its
//     resourceVersion, then the claimer takes the Lease, so no two replicas
//     claim one pod or bind two pods to one id; a claim whose Lease is taken
//     is undone.
//   - An instance ID is "<pod name>/<pod UID>": every call acting on a pod
//     checks its UID (a delete has a UID precondition). A claimed pool pod's
//     name is its sandbox's (annotation previewgate.name).
//   - Start watches the one pod until it runs; Watch is an informer on the
//     scoped pods, translated to runtime Events.
//   - A workspace is a PersistentVolumeClaim per sandbox, kept by a stop,
//     deleted by a remove (workspace.go).

// LabelClaimed marks a pool pod claimed for a sandbox (pod labels can
// change; Docker's cannot, so Docker renames); annName names the sandbox.
const (
	LabelClaimed = "previewgate.claimed"
	annName      = "previewgate.name"
)

// Config configures the Kubernetes runtime (Config.Runtime "kubernetes").
type Config struct {
	// Namespace holds the sandboxes' objects. Zero means the gateway's own
	// (in cluster), else config.DefaultSandboxNamespace.
	Namespace string
	// Kubeconfig is a kubeconfig file. Zero means $KUBECONFIG, then
	// ~/.kube/config, unless InCluster.
	Kubeconfig string
	// InCluster uses the pod's service account.
	InCluster bool
	// REST, if set, is used as is (tests).
	REST *rest.Config
	// GatewayLabels select the gateway's pods, which alone the sandboxes'
	// NetworkPolicy admits. Zero means app.kubernetes.io/name=previewgate.
	GatewayLabels map[string]string
	// GatewayNamespace is where the gateway's pods run, for the same
	// policy. Zero means Namespace.
	GatewayNamespace string
	// GatewayCIDRs also may reach sandboxes: a gateway outside the
	// cluster (its nodes' or its NAT's addresses).
	GatewayCIDRs []string
	// Egress is what sandboxes may reach (network.go): EgressInternet
	// (zero), EgressNone or EgressOpen; EgressAllow adds CIDRs.
	Egress      string
	EgressAllow []string
	// RunAsUser is the uid sandbox containers run as (runAsNonRoot). Zero
	// means 1000; negative means the image's own user (which may be root).
	RunAsUser int64
	// ActivityEvery bounds how often a replica records a sandbox's
	// activity in its Lease. Zero means config.DefaultActivityEvery.
	ActivityEvery time.Duration
	// SweepEvery is how often leases whose pods are gone are deleted
	// (sweep.go). Zero means a minute.
	SweepEvery time.Duration
	// Log receives the runtime's own findings (the sweep). Nil: none.
	Log *slog.Logger
}

const kubeContainer = "app"

// Runtime is the Kubernetes runtime.
type Runtime struct {
	cs    kubernetes.Interface // calls, each bounded by Timeout (30s)
	watch kubernetes.Interface // the informer's list and watch: no client timeout
	ns    string
	kc    Config
	base  map[string]string // Config.Labels, also set on leases
}

// New connects lazily to the API server of kc; labels are the manager's
// scope labels, also set on Leases.
func New(kc Config, labels map[string]string) (*Runtime, error) {
	rc := kc.REST
	if rc == nil {
		var err error
		switch {
		case kc.InCluster:
			rc, err = rest.InClusterConfig()
		default:
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			if kc.Kubeconfig != "" {
				rules.ExplicitPath = kc.Kubeconfig
			}
			rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
		}
		if err != nil {
			return nil, fmt.Errorf("kubernetes client config: %w", err)
		}
	}
	rc = rest.CopyConfig(rc)
	if rc.QPS == 0 {
		// client-go's default (5/s) would throttle lease renewals alone.
		rc.QPS, rc.Burst = 50, 100
	}
	if rc.ContentType == "" {
		// Protobuf, as the cluster's controllers talk: far smaller lists.
		rc.ContentType = "application/vnd.kubernetes.protobuf"
		rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	// Watches stream for minutes: no 30s client timeout for them.
	watchRC := rest.CopyConfig(rc)
	if rc.Timeout == 0 {
		rc.Timeout = 30 * time.Second
	}
	if kc.Namespace == "" {
		kc.Namespace = config.DefaultSandboxNamespace
		if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && kc.InCluster {
			kc.Namespace = strings.TrimSpace(string(b))
		}
	}
	if kc.GatewayNamespace == "" {
		kc.GatewayNamespace = kc.Namespace
	}
	if len(kc.GatewayLabels) == 0 {
		k, v, _ := strings.Cut(config.DefaultGatewayLabel, "=")
		kc.GatewayLabels = map[string]string{k: v}
	}
	if kc.RunAsUser == 0 {
		kc.RunAsUser = config.DefaultRunAsUser
	}
	if kc.ActivityEvery <= 0 {
		kc.ActivityEvery = config.DefaultActivityEvery
	}
	if kc.SweepEvery <= 0 {
		kc.SweepEvery = time.Minute
	}
	if kc.Log == nil {
		kc.Log = slog.New(slog.DiscardHandler)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	watchCS, err := kubernetes.NewForConfig(watchRC)
	if err != nil {
		return nil, fmt.Errorf("kubernetes watch client: %w", err)
	}
	return &Runtime{cs: cs, watch: watchCS, ns: kc.Namespace, kc: kc, base: withLabels(labels)}, nil
}

// withLabels is a copy of l, never nil.
func withLabels(l map[string]string) map[string]string {
	if l = maps.Clone(l); l == nil {
		l = map[string]string{}
	}
	return l
}

// kclassify maps API errors to the runtime's: not found to notFound, a
// create conflict to ErrNameTaken, an unreachable or overloaded API
// server to ErrUnavailable.
func kclassify(op string, err, notFound error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err) && notFound != nil:
		return fmt.Errorf("%s: %w", op, notFound)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%s: %w", op, runtime.ErrNameTaken)
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return fmt.Errorf("%s: %w: %w", op, runtime.ErrUnavailable, err)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, runtime.ErrUnavailable, err) // a transport error
}

func kubeID(pod *corev1.Pod) string { return pod.Name + "/" + string(pod.UID) }

// splitKubeID splits "<pod name>/<uid>"; a plain name has no UID.
func splitKubeID(s string) (name string, uid types.UID) {
	name, u, _ := strings.Cut(s, "/")
	return name, types.UID(u)
}

// logicalName is the name the manager knows pod by: its sandbox's for a
// claimed pool pod (legacy if claimed before names were scoped), else its own.
func logicalName(pod *corev1.Pod) string {
	if id := pod.Labels[LabelClaimed]; id != "" {
		if n := pod.Annotations[annName]; n != "" {
			return n
		}
		return runtime.LegacyName(id)
	}
	return pod.Name
}

func podInfo(pod *corev1.Pod) runtime.Instance {
	c := runtime.Instance{
		ID:      kubeID(pod),
		Name:    logicalName(pod),
		Labels:  maps.Clone(pod.Labels),
		IP:      pod.Status.PodIP,
		Created: pod.CreationTimestamp.Time,
		State:   runtime.StateCreated,
	}
	if len(pod.Spec.Containers) > 0 {
		c.Image = pod.Spec.Containers[0].Image
	}
	var cst *corev1.ContainerStatus
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == kubeContainer {
			cst = &pod.Status.ContainerStatuses[i]
		}
	}
	switch {
	case pod.DeletionTimestamp != nil:
		c.State = runtime.StateRemoving
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		c.State = runtime.StateExited
		if cst != nil && cst.State.Terminated != nil {
			c.ExitCode = int(cst.State.Terminated.ExitCode)
			c.OOMKilled = cst.State.Terminated.Reason == "OOMKilled"
		} else if pod.Status.Phase == corev1.PodFailed {
			c.ExitCode = 1
		}
	case pod.Status.Phase == corev1.PodRunning && cst != nil && cst.State.Running != nil:
		c.State = runtime.StateRunning
		c.StartedAt = cst.State.Running.StartedAt.Time
	case pod.Status.Phase == corev1.PodRunning:
		c.State = runtime.StateRestarting
	}
	return c
}

func (e *Runtime) Ping(ctx context.Context) error {
	err := e.cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
	return kclassify("kubernetes api", err, nil)
}

func (e *Runtime) getPod(ctx context.Context, name string) (*corev1.Pod, error) {
	pod, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, kclassify("get pod "+name, err, runtime.ErrNotFound)
	}
	return pod, nil
}

// podByID returns the pod an ID or name stands for; runtime.ErrNotFound
// if it is gone or another pod has its name now.
func (e *Runtime) podByID(ctx context.Context, id string) (*corev1.Pod, error) {
	name, uid := splitKubeID(id)
	pod, err := e.getPod(ctx, name)
	if err != nil {
		return nil, err
	}
	if uid != "" && pod.UID != uid {
		return nil, fmt.Errorf("pod %s: %w (replaced)", name, runtime.ErrNotFound)
	}
	return pod, nil
}

func (e *Runtime) Lookup(ctx context.Context, name string) (runtime.Instance, error) {
	if claim, uid, ok := splitKeptID(name); ok {
		return e.keptWorkspace(ctx, claim, uid)
	}
	pod, err := e.podByID(ctx, name)
	if err == nil {
		return podInfo(pod), nil
	}
	sbx, isSandbox := runtime.SandboxOf(name)
	if !errors.Is(err, runtime.ErrNotFound) || strings.Contains(name, "/") || !isSandbox || !config.ValidID(sbx) {
		return runtime.Instance{}, err
	}
	if pod := e.claimedPod(ctx, sbx, name); pod != nil {
		return podInfo(pod), nil
	}
	// No pod serves it: maybe its workspace is kept (a stopped sandbox).
	return e.keptWorkspace(ctx, name, "")
}

// claimedPod returns the pool pod claimed for sandbox sbx (named name),
// named by its lease; nil if there is none (or it cannot be told).
func (e *Runtime) claimedPod(ctx context.Context, sbx, name string) *corev1.Pod {
	holder, _, err := e.leaseHolder(ctx, name)
	if err != nil || holder == "" || holder == name {
		return nil
	}
	pod, err := e.getPod(ctx, holder)
	if err != nil || pod.Labels[LabelClaimed] != sbx {
		return nil
	}
	return pod
}

func (e *Runtime) Create(ctx context.Context, s runtime.Spec) (string, error) {
	port := 3000
	if p := s.Port; p > 0 {
		port = p
	}
	if s.Labels[runtime.LabelPool] != "" {
		s.Workspace = nil // a pool pod serves no sandbox yet
	}
	if s.Workspace != nil {
		// Before the lock: the lease's holder must not wait for the claim.
		if err := e.ensureWorkspace(ctx, s); err != nil {
			return "", err
		}
	}
	if s.Labels[runtime.LabelPool] == "" {
		// A sandbox: take the id's lock first (a pool claim takes it too).
		if err := e.takeLease(ctx, s.Name, s.Labels[runtime.LabelSandbox], s.Name); err != nil {
			return "", err
		}
	}

	pod, err := e.cs.CoreV1().Pods(e.ns).Create(ctx, e.podSpec(s, port, s.ReadyPath), metav1.CreateOptions{})
	if err != nil {
		return "", kclassify("create pod "+s.Name, err, runtime.ErrNoImage)
	}
	return kubeID(pod), nil
}

func (e *Runtime) List(ctx context.Context, lbls map[string]string) ([]runtime.Instance, error) {
	list, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(lbls).String()})
	if err != nil {
		return nil, kclassify("list pods", err, nil)
	}
	out := make([]runtime.Instance, 0, len(list.Items))
	stopping := make(map[string]int) // workspace claim → its pod being deleted, in out
	for i := range list.Items {
		c := podInfo(&list.Items[i])
		if claim := workspaceClaim(&list.Items[i]); claim != "" && c.State == runtime.StateRemoving {
			stopping[claim] = len(out)
		}
		out = append(out, c)
	}
	kept, stops, err := e.listKept(ctx, lbls, out)
	if err != nil {
		return nil, err
	}
	for claim, i := range stopping {
		// A stop under way is recorded on the claim: a manager starting now
		// must not take the pod's end for a stop then (workspace.go).
		out[i].StoppedAt = stops[claim]
	}
	return append(out, kept...), nil
}
