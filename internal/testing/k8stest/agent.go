package k8stest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// NodeName is the node the agent binds pods to.
const NodeName = "previewgate-test-node"

// Agent is TEST CODE standing in for a scheduler and a kubelet, neither of
// which can run on these machines: it binds every pending pod of one
// namespace to NodeName, runs its first container as a Docker container
// (image, command, args, env, user, capabilities; on a test network, labelled
// for cleanup), and writes the pod's IP, phase and Ready condition back. A
// pod being deleted loses its container and is then deleted for good (grace
// 0), as a kubelet confirms a graceful deletion. A container that exits makes
// its pod Succeeded or Failed (restartPolicy Never is all it implements).
//
// It is deliberately small: of volumes only persistentVolumeClaims (as
// Docker named volumes, agent_pvc.go), no probes beyond a TCP connect to
// the first declared port before Ready, no init containers.
type Agent struct {
	t       testing.TB
	cs      kubernetes.Interface
	docker  *client.Client
	ns      string
	network string

	pvcs   corelisters.PersistentVolumeClaimLister
	queue  workqueue.TypedRateLimitingInterface[string]
	cancel context.CancelFunc
	wg     sync.WaitGroup // informer and workers

	mu   sync.Mutex           // guards ctrs, vols
	ctrs map[types.UID]string // pod UID → Docker container ID
	vols map[types.UID]string // claim UID → Docker volume
}

// StartAgent runs an agent for namespace ns until t ends; pods' containers
// join the Docker network net (which must exist).
func StartAgent(t testing.TB, cs kubernetes.Interface, ns, net string) *Agent {
	t.Helper()
	docker := dockertest.Client(t)
	if _, err := docker.NetworkInspect(context.Background(), net, network.InspectOptions{}); err != nil {
		if _, err := docker.NetworkCreate(context.Background(), net, network.CreateOptions{Labels: dockertest.Labels()}); err != nil {
			t.Fatalf("agent: create network %s: %v", net, err)
		}
	}
	a := &Agent{t: t, cs: cs, docker: docker, ns: ns, network: net,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		ctrs:  make(map[types.UID]string), vols: make(map[types.UID]string)}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	// Pods queue as ns/name, claims as pvcKeyPrefix+name.
	watch := func(inf cache.SharedIndexInformer, key func(string) string) cache.InformerSynced {
		enqueue := func(obj any) {
			if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				a.queue.Add(key(k))
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue})
		a.wg.Go(func() { inf.Run(ctx.Done()) })
		return inf.HasSynced
	}
	podsSynced := watch(f.Core().V1().Pods().Informer(), func(k string) string { return k })
	pvcsSynced := watch(f.Core().V1().PersistentVolumeClaims().Informer(), func(k string) string {
		_, name, _ := cache.SplitMetaNamespaceKey(k)
		return pvcKeyPrefix + name
	})
	lister := f.Core().V1().Pods().Lister()
	a.pvcs = f.Core().V1().PersistentVolumeClaims().Lister()
	if !cache.WaitForCacheSync(ctx.Done(), podsSynced, pvcsSynced) {
		t.Fatal("agent: informers did not sync")
	}
	for range 4 {
		a.wg.Go(func() {
			for {
				key, quit := a.queue.Get()
				if quit {
					return
				}
				var err error
				if claim, ok := strings.CutPrefix(key, pvcKeyPrefix); ok {
					err = a.syncPVC(ctx, claim, a.pvcs, lister)
				} else {
					err = a.sync(ctx, key, lister.Pods(ns).Get)
				}
				if err != nil && ctx.Err() == nil {
					t.Logf("agent: %s: %v (retrying)", key, err)
					a.queue.AddRateLimited(key)
				} else {
					a.queue.Forget(key)
				}
				a.queue.Done(key)
			}
		})
	}
	t.Cleanup(a.stop)
	return a
}

func (a *Agent) stop() {
	a.cancel()
	a.queue.ShutDown()
	a.wg.Wait()
	a.mu.Lock()
	ids := make([]string, 0, len(a.ctrs))
	for _, id := range a.ctrs {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for _, id := range ids {
		_ = a.docker.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
	}
	a.removeAllVolumes()
}

// Containers counts the Docker containers the agent runs now.
func (a *Agent) Containers() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ctrs)
}

func (a *Agent) sync(ctx context.Context, key string, get func(string) (*corev1.Pod, error)) error {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := get(name)
	if apierrors.IsNotFound(err) {
		a.removeOrphans(ctx)
		a.requeueDeletedClaims(a.pvcs)
		return nil
	}
	if err != nil {
		return err
	}
	pod = pod.DeepCopy()
	switch {
	case pod.DeletionTimestamp != nil:
		a.removeContainer(ctx, pod.UID)
		grace := int64(0)
		err := a.cs.CoreV1().Pods(a.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete: %w", err)
		}
		return nil
	case pod.Spec.NodeName == "":
		err := a.cs.CoreV1().Pods(a.ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: NodeName},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("bind: %w", err)
		}
		return nil // the update brings it back
	case pod.Status.Phase == corev1.PodPending && pod.Spec.NodeName == NodeName:
		return a.run(ctx, pod)
	case pod.Status.Phase == corev1.PodRunning:
		return a.check(ctx, pod)
	}
	return nil
}

// run starts pod's container and reports it Running, then Ready once its
// port accepts connections.
func (a *Agent) run(ctx context.Context, pod *corev1.Pod) error {
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	c := pod.Spec.Containers[0]
	a.mu.Lock()
	ctrID, ok := a.ctrs[pod.UID]
	a.mu.Unlock()
	if !ok {
		var err error
		if ctrID, err = a.startContainer(ctx, pod, c); err != nil {
			return err
		}
	}
	info, err := a.docker.ContainerInspect(ctx, ctrID)
	if err != nil {
		return fmt.Errorf("inspect container: %w", err)
	}
	ip := ""
	if ep := info.NetworkSettings.Networks[a.network]; ep != nil {
		ip = ep.IPAddress
	}
	started, _ := time.Parse(time.RFC3339Nano, info.State.StartedAt)
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	pod.Status.HostIP = "127.0.0.1"
	pod.Status.StartTime = &now
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: c.Name, Image: c.Image, ImageID: info.Image, ContainerID: "docker://" + ctrID,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
	}}
	setCondition(pod, corev1.PodScheduled, true)
	setCondition(pod, corev1.PodInitialized, true)
	setCondition(pod, corev1.ContainersReady, false)
	setCondition(pod, corev1.PodReady, false)
	pod, err = a.cs.CoreV1().Pods(a.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

// check reports a Running pod Ready once its port answers, and Failed or
// Succeeded once its container exited.
func (a *Agent) check(ctx context.Context, pod *corev1.Pod) error {
	a.mu.Lock()
	ctrID, ok := a.ctrs[pod.UID]
	a.mu.Unlock()
	if !ok {
		return nil // not ours (a restarted agent would adopt; this one does not)
	}
	info, err := a.docker.ContainerInspect(ctx, ctrID)
	if err != nil {
		return fmt.Errorf("inspect container: %w", err)
	}
	if !info.State.Running {
		pod.Status.Phase = corev1.PodFailed
		if info.State.ExitCode == 0 {
			pod.Status.Phase = corev1.PodSucceeded
		}
		setCondition(pod, corev1.PodReady, false)
		_, err := a.cs.CoreV1().Pods(a.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	}
	if podReady(pod) {
		return nil
	}
	port := 0
	if c := pod.Spec.Containers[0]; len(c.Ports) > 0 {
		port = int(c.Ports[0].ContainerPort)
	}
	if port > 0 && pod.Status.PodIP != "" {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)), time.Second)
		if err != nil {
			a.queue.AddAfter(pod.Name, 20*time.Millisecond)
			return nil
		}
		conn.Close()
	}
	setCondition(pod, corev1.ContainersReady, true)
	setCondition(pod, corev1.PodReady, true)
	if len(pod.Status.ContainerStatuses) > 0 {
		pod.Status.ContainerStatuses[0].Ready = true
	}
	_, err = a.cs.CoreV1().Pods(a.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil // a newer version is queued
	}
	return err
}

func (a *Agent) removeContainer(ctx context.Context, uid types.UID) {
	a.mu.Lock()
	id, ok := a.ctrs[uid]
	delete(a.ctrs, uid)
	a.mu.Unlock()
	if ok {
		// Not canceled with the agent: a removal cut short on our side goes
		// on in the daemon and races the test's network cleanup.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err := a.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
		if err != nil && !errors.Is(err, context.Canceled) {
			a.t.Logf("agent: remove container %s: %v", id, err)
		}
	}
}

// removeOrphans removes the containers of pods that are gone (deleted with
// grace 0 by someone else, so the agent never saw them terminating).
func (a *Agent) removeOrphans(ctx context.Context) {
	pods, err := a.cs.CoreV1().Pods(a.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	live := make(map[types.UID]bool, len(pods.Items))
	for _, p := range pods.Items {
		live[p.UID] = true
	}
	a.mu.Lock()
	var gone []types.UID
	for uid := range a.ctrs {
		if !live[uid] {
			gone = append(gone, uid)
		}
	}
	a.mu.Unlock()
	for _, uid := range gone {
		a.removeContainer(ctx, uid)
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func setCondition(pod *corev1.Pod, typ corev1.PodConditionType, ok bool) {
	st := corev1.ConditionFalse
	if ok {
		st = corev1.ConditionTrue
	}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			if pod.Status.Conditions[i].Status != st {
				pod.Status.Conditions[i].Status = st
				pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: typ, Status: st, LastTransitionTime: metav1.Now()})
}
