package sandboxmgr_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/k8stest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Tests named Kubernetes run the Kubernetes runtime against a real
// kube-apiserver (k8stest), with k8stest's node agent running each pod as a
// Docker container. They fail, never skip, when the API server cannot be
// built or started.

type kubeEnv struct {
	cluster *k8stest.Cluster
	cs      kubernetes.Interface
	ns      string
	agent   *k8stest.Agent
	labels  map[string]string
	rest    *rest.Config
}

func newKubeEnv(t *testing.T) *kubeEnv {
	t.Helper()
	c := k8stest.Start(t)
	ns := c.NewNamespace(t)
	cs := c.Admin(t)
	return &kubeEnv{cluster: c, cs: cs, ns: ns, rest: c.Config(c.AdminToken),
		agent:  k8stest.StartAgent(t, cs, ns, dockertest.Network(t)),
		labels: map[string]string{dockertest.LabelTest: "1", dockertest.LabelRun: dockertest.RunID()}}
}

// name is the name of sandbox id's pod (and Lease, and claim) in e's scope.
func (e *kubeEnv) name(id string) string { return runtime.Name(runtime.Stamp(e.labels), id) }

// kubeConfig is a manager's config and its Kubernetes runtime's.
type kubeConfig struct {
	sandboxmgr.Config
	Kubernetes kube.Config
}

func (e *kubeEnv) config() kubeConfig {
	return kubeConfig{
		Config:     sandboxmgr.Config{Network: "previewgate-sandboxes", Labels: e.labels},
		Kubernetes: kube.Config{Namespace: e.ns, REST: e.rest},
	}
}

func (e *kubeEnv) manager(t *testing.T, cfg kubeConfig) *mgrtest.Manager {
	t.Helper()
	m, err := mgrtest.New(mgrtest.Config{Config: cfg.Config, Runtime: mgrtest.Runtime{Kube: &cfg.Kubernetes}}, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return m
}

// pods lists the pods serving sandbox id (created or claimed for it).
func (e *kubeEnv) pods(t *testing.T, id string) []corev1.Pod {
	t.Helper()
	list, err := e.cs.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitPodGone waits until no pod of id is left, not even a terminating one.
func (e *kubeEnv) waitPodGone(t *testing.T, id string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		list, err := e.cs.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + id})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod of %s still there after %v", id, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *kubeEnv) waitNoPod(t *testing.T, id string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(e.pods(t, id)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pod of %s still there after %v", id, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A first Ensure creates the pod from the template (security context,
// labels, name lock), the sandbox answers on the pod IP, a second create of
// the name is refused with AlreadyExists, Stop deletes the pod and reports
// its instance gone, and the next Ensure makes a new instance.
func TestKubernetesCreateStopRecreate(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	cfg := e.config()
	m := e.manager(t, cfg)
	rec := &goneList{}
	m.SetListener(rec)
	id := newID()
	tpl := testTemplate(t, map[string]string{"GREETING": "hi"})
	ep, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	get(t, ep)

	pod, err := e.cs.CoreV1().Pods(e.ns).Get(t.Context(), e.name(id), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod: %v", err)
	}
	if got := ep.Instance; got == "" || ep.Addr != pod.Status.PodIP+":3000" {
		t.Errorf("got endpoint %+v, want pod IP %s:3000 and an instance", ep, pod.Status.PodIP)
	}
	for k, want := range map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: id, runtime.LabelTemplate: "testapp", dockertest.LabelRun: dockertest.RunID()} {
		if got := pod.Labels[k]; got != want {
			t.Errorf("label %s: got %q, want %q", k, got, want)
		}
	}
	c := pod.Spec.Containers[0]
	sc := c.SecurityContext
	switch {
	case pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken:
		t.Error("service account token is mounted")
	case sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("got capabilities %+v, want all dropped", sc.Capabilities)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("not run as non-root")
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("no RuntimeDefault seccomp profile")
	case c.Resources.Limits.Memory().Value() != 64<<20:
		t.Errorf("got memory limit %v, want 64Mi", c.Resources.Limits.Memory())
	case len(c.Env) != 1 || c.Env[0].Name != "GREETING":
		t.Errorf("got env %v, want GREETING", c.Env)
	}
	if _, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(t.Context(), "previewgate-sandboxes", metav1.GetOptions{}); err != nil {
		t.Errorf("network policy: %v", err)
	}
	dup := pod.DeepCopy()
	dup.ResourceVersion, dup.UID = "", ""
	if _, err := e.cs.CoreV1().Pods(e.ns).Create(t.Context(), dup, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create of %s: got %v, want AlreadyExists", pod.Name, err)
	}

	if err := m.Stop(t.Context(), id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	e.waitNoPod(t, id, 20*time.Second)
	gone := rec.list()
	reported := len(gone) > 0 && gone[len(gone)-1] == ep.Instance
	if !reported {
		t.Errorf("instance %s not reported gone after Stop", ep.Instance)
	}
	ep2, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure after Stop: %v", err)
	}
	get(t, ep2)
	if ep2.Instance == ep.Instance {
		t.Errorf("got the same instance %s after a stop, want a new one", ep2.Instance)
	}
	if n := len(e.pods(t, id)); n != 1 {
		t.Errorf("got %d pods, want 1", n)
	}
}

// Concurrent first Ensures through three managers (replicas) make one pod;
// all get the same instance.
func TestKubernetesHerdThreeManagers(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	ms := []*mgrtest.Manager{e.manager(t, e.config()), e.manager(t, e.config()), e.manager(t, e.config())}
	id := newID()
	tpl := testTemplate(t, nil)
	var wg sync.WaitGroup
	insts := make([]string, 300)
	errs := make([]error, 300)
	for i := range insts {
		wg.Go(func() {
			ep, err := ms[i%3].Ensure(t.Context(), id, tpl)
			insts[i], errs[i] = ep.Instance, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Ensure %d: %v", i, err)
		}
		if insts[i] != insts[0] {
			t.Fatalf("got instances %s and %s, want one", insts[0], insts[i])
		}
	}
	if n := len(e.pods(t, id)); n != 1 {
		t.Errorf("got %d pods, want 1", n)
	}
	if n := e.agent.Containers(); n != 1 {
		t.Errorf("got %d containers, want 1", n)
	}
}

// One warm pool per cluster (#26, 5): pool: 6 means six warm pods for
// three replicas together (it made 18 when each replica kept its own), each
// replica sees all six, and two replicas racing for each of six new ids
// both claim (none creates), so every sandbox is served from the pool.
func TestKubernetesPoolClaimAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	tpl.Pool = 6
	cfg := e.config()
	cfg.PoolEvery = 100 * time.Millisecond
	cfg.RecheckEvery = 300 * time.Millisecond // how soon a replica sees another's pool pods
	cfg.ListTemplates = func() []*config.Template { return []*config.Template{tpl} }
	cfg.Templates = func(string) *config.Template { return tpl }
	ms := []*mgrtest.Manager{e.manager(t, cfg), e.manager(t, cfg), e.manager(t, cfg)}
	deadline := time.Now().Add(60 * time.Second)
	for ms[0].PoolSize(tpl.Name) < tpl.Pool || ms[1].PoolSize(tpl.Name) < tpl.Pool || ms[2].PoolSize(tpl.Name) < tpl.Pool {
		if time.Now().After(deadline) {
			t.Fatalf("pools not seen whole within 60s: %d %d %d", ms[0].PoolSize(tpl.Name), ms[1].PoolSize(tpl.Name), ms[2].PoolSize(tpl.Name))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // an overfill would show by now
	all, err := e.cs.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: runtime.LabelPool})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(all.Items); n != tpl.Pool {
		t.Errorf("got %d pool pods for 3 replicas, want %d: one pool per cluster", n, tpl.Pool)
	}
	ids := make([]string, 6)
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i := range ids {
		ids[i] = newID()
		wg.Go(func() {
			// Two replicas race for each id.
			var inner sync.WaitGroup
			for r := range 2 {
				inner.Go(func() {
					if _, err := ms[(i+r)%3].Ensure(t.Context(), ids[i], tpl); err != nil {
						errs[i] = errors.Join(errs[i], err)
					}
				})
			}
			inner.Wait()
		})
	}
	wg.Wait()
	claimedBy := map[string]string{}
	for i, id := range ids {
		if errs[i] != nil {
			t.Errorf("Ensure %s: %v", id, errs[i])
		}
		pods := e.pods(t, id)
		if len(pods) != 1 {
			t.Errorf("sandbox %s: got %d pods, want 1", id, len(pods))
			for _, p := range pods {
				t.Logf("  pod %s labels %v", p.Name, p.Labels)
			}
		}
		for _, p := range pods {
			if other, ok := claimedBy[p.Name]; ok {
				t.Errorf("pod %s claimed for %s and %s", p.Name, other, id)
			}
			claimedBy[p.Name] = id
		}
	}
	claims := 0
	for name := range claimedBy {
		if name[:len("previewgate-pool-")] == "previewgate-pool-" {
			claims++
		}
	}
	if claims != len(ids) {
		t.Errorf("%d of %d sandboxes served from the pool, want all (pods %v)", claims, len(ids), claimedBy)
	}
}

// A gateway killed mid-create leaves at worst a lease naming a pod that
// never came: the next Ensure (any replica) takes the lease over and makes
// exactly one pod; a gateway killed after the create leaves a pod the next
// Ensure adopts.
func TestKubernetesKilledMidCreate(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	// Killed after the lease, before the claim of pool pod "gone": the lease
	// names a pool pod that is not bound to the id.
	id := newID()
	holder := "previewgate-pool-testapp-gone"
	now := metav1.NowMicro()
	lease := &coordLease{name: e.name(id), holder: holder, labels: e.labels, at: now}
	lease.create(t, e)
	m := e.manager(t, e.config())
	if _, err := m.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatalf("Ensure over a stale lease: %v", err)
	}
	if n := len(e.pods(t, id)); n != 1 {
		t.Errorf("got %d pods, want 1", n)
	}

	// Killed right after the pod create (ctx canceled mid-wake): a second
	// replica adopts the pod.
	id2 := newID()
	a := e.manager(t, e.config())
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for len(e.pods(t, id2)) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		a.Close() // the replica dies; its wake is canceled
	}()
	_, _ = a.Ensure(ctx, id2, tpl)
	b := e.manager(t, e.config())
	if _, err := b.Ensure(t.Context(), id2, tpl); err != nil {
		t.Fatalf("Ensure on the surviving replica: %v", err)
	}
	if n := len(e.pods(t, id2)); n != 1 {
		t.Errorf("got %d pods, want 1", n)
	}
}

// Replica A sees no traffic, replica B sees it all: A must not stop the
// sandbox while B is busy (B publishes activity in the Lease), and stops it
// once B is quiet too.
func TestKubernetesIdleAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	tpl.IdleTimeout = config.Duration(3 * time.Second)
	cfg := e.config()
	cfg.ReapEvery = 200 * time.Millisecond
	cfg.Templates = func(string) *config.Template { return tpl }
	cfg.Kubernetes.ActivityEvery = 500 * time.Millisecond
	a := e.manager(t, cfg)
	bcfg := cfg
	bcfg.ReapEvery = -1 // B only serves
	b := e.manager(t, bcfg)
	id := newID()
	if _, err := a.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(3 * time.Duration(tpl.IdleTimeout))
	for time.Now().Before(end) {
		b.Sandbox(id).Touch()
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(e.pods(t, id)); n != 1 {
		t.Fatalf("got %d pods after %v of traffic on B only, want 1 (A stopped a busy sandbox)", n, 3*time.Duration(tpl.IdleTimeout))
	}
	t0 := time.Now()
	e.waitNoPod(t, id, 20*time.Second)
	t.Logf("stopped %v after the last request on B (idle_timeout %v)", time.Since(t0).Round(100*time.Millisecond), time.Duration(tpl.IdleTimeout))
}

type coordLease struct {
	name, holder string
	labels       map[string]string
	at           metav1.MicroTime
}

func (l *coordLease) create(t *testing.T, e *kubeEnv) {
	t.Helper()
	obj := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q},"spec":{"holderIdentity":%q}}`, l.name, l.holder)
	err := e.cs.CoordinationV1().RESTClient().Post().Namespace(e.ns).Resource("leases").Body([]byte(obj)).
		SetHeader("Content-Type", "application/json").Do(t.Context()).Error()
	if err != nil {
		t.Fatalf("create lease: %v", err)
	}
}

// goneList records the instances the manager reports gone.
type goneList struct {
	mu   sync.Mutex // guards gone
	gone []string
}

func (g *goneList) BeforeStop(string) {}

func (g *goneList) InstanceGone(inst string) {
	g.mu.Lock()
	g.gone = append(g.gone, inst)
	g.mu.Unlock()
}

func (g *goneList) list() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.gone...)
}
