package sandboxmgr

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/k8stest"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
)

// BenchmarkKubernetesThousandSandboxes measures what one gateway replica
// pays for 1,000 sandboxes on the Kubernetes runtime (the table in
// docs/kubernetes.md): its heap after it adopted them, the bytes of its
// initial list, and the watch bytes and events each pod change costs it.
// The pods are made by the runtime's own Create (Lease and Pod, as a first
// request makes them) and brought to Running/Ready by writing their status
// as a kubelet does; no container runs, so the numbers are the replica's
// alone. One iteration is the whole measurement (-benchtime 1x).
func BenchmarkKubernetesThousandSandboxes(b *testing.B) {
	const n = 1000
	c := k8stest.Start(b)
	ns := fmt.Sprintf("pg-scale-%d", time.Now().UnixNano()%1e9)
	c.Namespace(b, ns)
	admin := c.Admin(b)
	labels := map[string]string{dockertest.LabelTest: "1", dockertest.LabelRun: dockertest.RunID()}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	kcfg := func(rc *rest.Config) (Config, kube.Config) {
		return Config{Labels: labels, ReapEvery: -1}, kube.Config{Namespace: ns, REST: rc}
	}
	maker, err := newKube(kcfg(c.Config(c.AdminToken)))(quiet)
	if err != nil {
		b.Fatal(err)
	}
	defer maker.Close()
	tpl := &config.Template{Name: "app", Image: "registry.example/previewgate/app:dev", Port: 3000,
		Env: map[string]string{"NODE_ENV": "development", "PORT": "3000"}, Memory: 512 << 20, CPUs: 1}
	tpl.Ready.Path = "/"
	for b.Loop() {
		makeSandboxes(b, maker, admin, ns, tpl, n)

		var ctr traffic
		rc := c.Config(c.AdminToken)
		rc.WrapTransport = ctr.wrap
		goruntime.GC()
		var before goruntime.MemStats
		goruntime.ReadMemStats(&before)
		m, err := newKube(kcfg(rc))(quiet)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Start(b.Context()); err != nil {
			b.Fatalf("replica start over %d pods: %v", n, err)
		}
		list, err := m.List(b.Context())
		if seen := len(list); err != nil || seen != n {
			b.Fatalf("the replica sees %d sandboxes (%v), want %d", seen, err, n)
		}
		list = nil
		goruntime.GC()
		var after goruntime.MemStats
		goruntime.ReadMemStats(&after)
		startBytes, startCalls := ctr.read.Load(), ctr.calls.Load()
		b.Logf("replica start over %d sandboxes: %d calls %v", n, startCalls, ctr.kinds())

		// One status change per pod (a restart count, say), seen over the
		// replica's watch.
		w0 := ctr.watchBytes.Load()
		eachPod(b, admin, ns, n, func(p *corev1.Pod) error {
			p.Status.ContainerStatuses[0].RestartCount++
			_, err := admin.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
			return err
		})
		waitQuiet(b, &ctr, w0)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MiB/1000")
		b.ReportMetric(float64(startBytes)/(1<<20), "start-MiB")
		b.ReportMetric(float64(ctr.watchBytes.Load()-w0)/n, "watch-B/event")
		b.ReportMetric(float64(startCalls), "start-calls")
		m.Close()

		calls, kinds := serveAndIdleStop(b, c, kcfg, tpl, n)
		b.Logf("serve and idle stop of %d sandboxes: %d calls %v", n, calls, kinds)
		b.ReportMetric(float64(calls)/n, "idle-stop-calls/sandbox")
	}
}

// serveAndIdleStop takes the n running sandboxes through a request each
// (served from the cache: no API call) and the idle reaper of a fresh
// replica, and returns the API calls that cost. The pods have no node
// agent, so a deleted pod stays Terminating: its deletionTimestamp counts
// as stopped.
func serveAndIdleStop(b *testing.B, c *k8stest.Cluster, kcfg func(*rest.Config) (Config, kube.Config), tpl *config.Template, n int) (int64, map[string]int) {
	b.Helper()
	idle := *tpl
	idle.IdleTimeout = config.Duration(2 * time.Second)
	var ctr traffic
	rc := c.Config(c.AdminToken)
	rc.WrapTransport = ctr.wrap
	cfg, kc := kcfg(rc)
	cfg.ReapEvery = 200 * time.Millisecond
	cfg.MaxRunning = 2 * n // they all run: the cap is not what is measured
	cfg.Templates = func(string) *config.Template { return &idle }
	m, err := newKube(cfg, kc)(slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	c0 := ctr.calls.Load()
	k0 := ctr.kinds()
	for i := range n {
		id := fmt.Sprintf("scale-%04d", i)
		if _, err := m.Ensure(b.Context(), id, &idle); err != nil {
			b.Fatalf("serve %s: %v", id, err)
		}
		m.Sandbox(id).Touch()
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pods, err := c.Admin(b).CoreV1().Pods(kc.Namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		left := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d sandboxes still running 3 minutes after the last request", left, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
	kinds := ctr.kinds()
	for k, v := range k0 {
		kinds[k] -= v
		if kinds[k] == 0 {
			delete(kinds, k)
		}
	}
	return ctr.calls.Load() - c0, kinds
}

// makeSandboxes creates n sandboxes through the runtime's Create and writes
// each pod's status Running and Ready.
func makeSandboxes(b *testing.B, m *Manager, admin kubernetes.Interface, ns string, tpl *config.Template, n int) {
	b.Helper()
	parallel(b, n, func(i int) error {
		s, err := m.spec(fmt.Sprintf("scale-%04d", i), tpl)
		if err != nil {
			return err
		}
		_, err = m.rt.Create(context.Background(), s)
		return err
	})
	var next atomic.Int64
	eachPod(b, admin, ns, n, func(p *corev1.Pod) error {
		now := metav1.Now()
		// One address per pod, as a cluster gives them: the manager keeps
		// an address to one sandbox, and drops the others' records.
		k := next.Add(1)
		ip := fmt.Sprintf("10.%d.%d.%d", 1+k>>16, k>>8&0xff, k&0xff)
		p.Spec.NodeName = k8stest.NodeName
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.PodIPs, p.Status.HostIP = ip, []corev1.PodIP{{IP: ip}}, "10.0.0.1"
		p.Status.StartTime = &now
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
			Image: p.Spec.Containers[0].Image, Ready: true, ContainerID: "containerd://" + strings.Repeat("ab", 32),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		_, err := admin.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
}

// eachPod lists the namespace's pods (n expected) and applies f to each.
func eachPod(b *testing.B, admin kubernetes.Interface, ns string, n int, f func(*corev1.Pod) error) {
	b.Helper()
	pods, err := admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != n {
		b.Fatalf("listed %d pods (%v), want %d", len(pods.Items), err, n)
	}
	parallel(b, n, func(i int) error { return f(&pods.Items[i]) })
}

// parallel runs f(0..n-1) on 16 workers and fails b on the first error.
func parallel(b *testing.B, n int, f func(int) error) {
	b.Helper()
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := first.Load(); err != nil {
		b.Fatal(*err)
	}
}

// waitQuiet waits until the watch has carried bytes since w0 and then
// nothing more for half a second: every change has arrived. (Watch events
// are protobuf frames, not lines, so they are not counted one by one.)
func waitQuiet(b *testing.B, ctr *traffic, w0 int64) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	last, stable := int64(-1), 0
	for stable < 5 {
		if time.Now().After(deadline) {
			b.Fatal("the replica's watch did not settle")
		}
		time.Sleep(100 * time.Millisecond)
		if now := ctr.watchBytes.Load(); now > w0 && now == last {
			stable++
		} else {
			last, stable = now, 0
		}
	}
}

// traffic counts a client's API calls and the bytes it reads, watch
// streams apart.
type traffic struct {
	calls, read, watchBytes atomic.Int64

	mu     sync.Mutex     // guards byKind
	byKind map[string]int // "GET pods" → calls
}

// kinds returns the calls by method and resource, for the log.
func (c *traffic) kinds() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byKind)
}

func (c *traffic) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.calls.Add(1)
		kind := req.Method + " " + resourceOf(req.URL.Path)
		if req.URL.Query().Get("watch") == "true" {
			kind = "WATCH " + resourceOf(req.URL.Path)
		}
		c.mu.Lock()
		if c.byKind == nil {
			c.byKind = make(map[string]int)
		}
		c.byKind[kind]++
		c.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, c: c, watch: req.URL.Query().Get("watch") == "true"}
		}
		return resp, err
	})
}

// resourceOf names the resource of an API path: ".../pods/previewgate-x" →
// "pods", "/version" → "version".
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			return parts[i+2]
		}
	}
	return parts[len(parts)-1]
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	c     *traffic
	watch bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.read.Add(int64(n))
	if b.watch {
		b.c.watchBytes.Add(int64(n))
	}
	return n, err
}

// newKube returns the maker of a manager of cfg on the Kubernetes runtime
// kc (its scope cfg.Labels), with the runtime's records.
func newKube(cfg Config, kc kube.Config) func(*slog.Logger) (*Manager, error) {
	return func(log *slog.Logger) (*Manager, error) {
		rt, err := kube.New(kc, cfg.Labels)
		if err != nil {
			return nil, err
		}
		return New(cfg, rt, testRecords(rt, cfg), log), nil
	}
}
