package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/k8stest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// kubeRecordEnv is one replica on the Kubernetes runtime whose watches run
// through a proxy that can stall them, on a network with room for one pod.
type kubeRecordEnv struct {
	c     *k8stest.Cluster
	ns    string
	proxy *watchProxy
	agent *k8stest.Agent
	net   string // the node's Docker network, with room for one pod
	cfg   *config.Config
	r     *replica
}

func newKubeRecordEnv(t *testing.T, recheck time.Duration, edit func(*config.Config)) *kubeRecordEnv {
	t.Helper()
	c := k8stest.Start(t)
	ns := c.NewNamespace(t)
	net := dockertest.Network(t)
	createTinyNetwork(t, net)
	agent := k8stest.StartAgent(t, c.Admin(t), ns, net)
	proxy := newWatchProxy(t, c)
	cfg, _ := dockerReplicaConfig(t)
	if edit != nil {
		edit(cfg)
		cfg.ApplyDefaults()
	}
	mc := mgrtest.Config{Config: sandboxmgr.Config{Network: "previewgate-sandboxes", RecheckEvery: recheck,
		Labels: map[string]string{dockertest.LabelTest: "1", dockertest.LabelRun: dockertest.RunID()}},
		Runtime: mgrtest.Runtime{Kube: &kube.Config{Namespace: ns, REST: proxy.Config(c.AdminToken)}}}
	return &kubeRecordEnv{c: c, ns: ns, proxy: proxy, agent: agent, net: net, cfg: cfg, r: startReplica(t, cfg, mc)}
}

// echo sends method to sandbox id (token: with one) and returns the status
// and the answering app's host name ("" if it was no echo).
func (e *kubeRecordEnv) echo(t *testing.T, method, id string, token bool) (int, string) {
	t.Helper()
	tok := ""
	if token {
		tok = testkit.Mint(t, e.cfg, id, time.Minute)
	}
	resp := testkit.Request(t, e.r.srv, method, "sandbox-"+id+"."+testDomain, "/echo", tok)
	body, _ := io.ReadAll(resp.Body)
	var echo struct{ Hostname string }
	json.Unmarshal(body, &echo)
	return resp.StatusCode, echo.Hostname
}

// TestKubernetesStalledWatchAddressReuse (#21, 1 on Kubernetes): the
// informer's watch stalls, sandbox A's pod is deleted unseen, and sandbox
// B's pod, created through the same gateway, gets A's address. A's users
// must never reach B's app.
func TestKubernetesStalledWatchAddressReuse(t *testing.T) {
	t.Parallel() // 30 s of it waits for ready timeouts; its network, namespace and proxy are its own
	// A's pod cannot start again (B holds the network's one address): each
	// of A's requests below ends at the ready timeout, kept short here.
	e := newKubeRecordEnv(t, -1, func(c *config.Config) {
		c.Templates["app"].Ready.Timeout = config.Duration(10 * time.Second)
	})
	a, b := dockertest.UniqueID("ka"), dockertest.UniqueID("kb")
	code, hostA := e.echo(t, "GET", a, true)
	if code != 200 || hostA == "" {
		t.Fatalf("A: got %d, want A's echo", code)
	}
	e.proxy.Stall()
	admin := e.c.Admin(t)
	pods, err := admin.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + a})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("A's pods: %v %v", pods, err)
	}
	ipA := pods.Items[0].Status.PodIP
	zero := int64(0)
	if err := admin.CoreV1().Pods(e.ns).Delete(t.Context(), pods.Items[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "A's container and its address gone from the node", func() bool {
		n, err := dockertest.Client(t).NetworkInspect(t.Context(), e.net, network.InspectOptions{})
		return e.agent.Containers() == 0 && err == nil && len(n.Containers) == 0
	})
	code, hostB := e.echo(t, "GET", b, true)
	if code != 200 || hostB == "" || hostB == hostA {
		t.Fatalf("B: got %d from %q, want B's echo", code, hostB)
	}
	pb, err := admin.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + b})
	if err != nil || len(pb.Items) != 1 || pb.Items[0].Status.PodIP != ipA {
		t.Fatalf("B's pod should have A's address %s: %v %v", ipA, pb, err)
	}
	for i, method := range []string{"POST", "GET", "POST"} {
		code, host := e.echo(t, method, a, true)
		if host == hostB {
			t.Fatalf("request %d (%s): A's user got B's app's answer (%d)", i, method, code)
		}
		t.Logf("A's user, request %d (%s), A's pod gone unseen, B on its address: %d from %q", i, method, code, host)
	}
}

// TestKubernetesStalledWatchDialConfirmed (#37, 1 on Kubernetes): as
// above, but the pod that gets A's address is no sandbox of this gateway's
// (a pod anyone made, as the network plugin hands a freed pod IP to the
// next pod), so no wake claims the address and the manager still caches
// A's endpoint: A's next request dials the other pod. The connection must
// not carry it: a live read of A's pod (by its UID) finds it gone.
func TestKubernetesStalledWatchDialConfirmed(t *testing.T) {
	t.Parallel()
	e := newKubeRecordEnv(t, -1, func(c *config.Config) {
		c.Templates["app"].Ready.Timeout = config.Duration(5 * time.Second)
	})
	a := dockertest.UniqueID("ka")
	code, hostA := e.echo(t, "GET", a, true)
	if code != 200 || hostA == "" {
		t.Fatalf("A: got %d, want A's echo", code)
	}
	e.proxy.Stall()
	admin := e.c.Admin(t)
	pods, err := admin.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + a})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("A's pods: %v %v", pods, err)
	}
	ipA := pods.Items[0].Status.PodIP
	zero := int64(0)
	if err := admin.CoreV1().Pods(e.ns).Delete(t.Context(), pods.Items[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "A's container and its address gone from the node", func() bool {
		n, err := dockertest.Client(t).NetworkInspect(t.Context(), e.net, network.InspectOptions{})
		return e.agent.Containers() == 0 && err == nil && len(n.Containers) == 0
	})
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other-" + a},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "app", Image: e.cfg.Templates["app"].Image, Ports: []corev1.ContainerPort{{ContainerPort: 3000}}}}}}
	if _, err := admin.CoreV1().Pods(e.ns).Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var hostOther string
	testkit.WaitFor(t, "the other pod answering on A's address", func() bool {
		p, err := admin.CoreV1().Pods(e.ns).Get(t.Context(), other.Name, metav1.GetOptions{})
		if err != nil || p.Status.PodIP == "" {
			return false
		}
		if p.Status.PodIP != ipA {
			t.Fatalf("the other pod got %s, A had %s: the network should have had room for one", p.Status.PodIP, ipA)
		}
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + ipA + ":3000/echo")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var echo struct{ Hostname string }
		json.NewDecoder(resp.Body).Decode(&echo)
		hostOther = echo.Hostname
		return hostOther != "" && hostOther != hostA
	})
	if _, ok := e.r.mgr.Cached(a); !ok {
		t.Fatal("the manager dropped A's endpoint: the watch is not stalled, the test shows nothing")
	}
	for i, method := range []string{"GET", "POST", "GET"} {
		code, host := e.echo(t, method, a, true)
		if host == hostOther {
			t.Errorf("request %d (%s): A's user got the other pod's answer (%d)", i, method, code)
			continue
		}
		t.Logf("A's user, request %d (%s), A's pod gone unseen, another pod on its address: %d from %q", i, method, code, host)
	}
}

// TestKubernetesPublicDefaultPolicy (#21, 2 and 3 on Kubernetes): with a
// public default template, a sandbox made from a private template stays
// private, and a request without a token creates no pod.
func TestKubernetesPublicDefaultPolicy(t *testing.T) {
	e := newKubeRecordEnv(t, 0, func(c *config.Config) {
		app := c.Templates["app"]
		site, priv := *app, *app
		site.Name, site.Public = "site", true
		priv.Name = "priv"
		c.Templates = map[string]*config.Template{"site": &site, "priv": &priv}
		c.DefaultTemplate = "site"
	})
	x, y := dockertest.UniqueID("kpriv"), dockertest.UniqueID("knew")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := e.r.mgr.Ensure(ctx, x, e.cfg.Templates["priv"]); err != nil {
		t.Fatal(err)
	}
	if code, _ := e.echo(t, "GET", x, false); code != http.StatusUnauthorized {
		t.Fatalf("anonymous request for a private sandbox under a public default: got %d, want 401", code)
	}
	if code, _ := e.echo(t, "GET", x, true); code != 200 {
		t.Fatalf("with a token: got %d, want 200", code)
	}
	if code, _ := e.echo(t, "GET", y, false); code != http.StatusUnauthorized {
		t.Fatalf("anonymous request for a new id: got %d, want 401", code)
	}
	pods, err := e.c.Admin(t).CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + y})
	if err != nil || len(pods.Items) != 0 {
		t.Fatalf("anonymous request made pods: %v %v", pods, err)
	}
}
