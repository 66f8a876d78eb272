package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/docker/docker/api/types/container"
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

// N gateway replicas (#15): each replica is a Gateway and a Manager of its
// own, in this process, sharing nothing but the runtime (one
// kube-apiserver), as replicas behind a load balancer do. A Docker engine
// is served by one gateway per scope: on Docker, "replicas" here are
// stand-ins sharing one records store (the tests of the manager's
// cross-replica logic on the quicker runtime), or just one.

type replica struct {
	mgr *mgrtest.Manager
	gw  *Gateway
	srv *httptest.Server
}

func startReplica(t *testing.T, cfg *config.Config, mc mgrtest.Config) *replica {
	t.Helper()
	mc.Templates = func(name string) *config.Template { return cfg.Templates[name] }
	mgr, err := mgrtest.New(mc, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := New(cfg, mgr, Options{Records: mgr.Records}, testkit.Logger(t))
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	mgr.SetListener(gw)
	t.Cleanup(gw.Close)
	srv := serve(t, NewServer(cfg, gw, testkit.Logger(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("manager start: %v", err)
	}
	t.Cleanup(func() { mgr.Close() })
	return &replica{mgr: mgr, gw: gw, srv: srv}
}

// herd sends n first requests for id at once, spread over the replicas,
// and counts the statuses (-1: transport errors).
func herd(t *testing.T, cfg *config.Config, rs []*replica, id string, n int) map[int]int {
	t.Helper()
	tok := testkit.Mint(t, cfg, id, time.Minute)
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	count := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", rs[i%len(rs)].srv.URL+"/", nil)
			req.Host = "sandbox-" + id + "." + testDomain
			req.Header.Set("Authorization", "Bearer "+tok)
			status := -1
			resp, err := client.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			} else if i%100 == 0 {
				t.Logf("request %d: %v", i, err)
			}
			mu.Lock()
			count[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return count
}

func dockerReplicaConfig(t *testing.T) (*config.Config, mgrtest.Config) {
	cfg := testConfig()
	cfg.Templates["app"].Image = dockertest.TestAppImage(t)
	cfg.Templates["app"].Ready = config.Ready{Path: "/", Timeout: config.Duration(30 * time.Second)}
	// Limits are per replica; the herd is one client IP and one subject.
	lots := &config.Rate{Rate: 1e6, Burst: 1e6}
	cfg.Limits.PerIP, cfg.Limits.PerSandbox, cfg.Limits.PerSubject = lots, lots, lots
	cfg.Limits.ConnectionsPerIP = 2000
	cfg.Limits.WebSocketsPerIP = 2000
	// One records store for all: a Docker gateway's, which its
	// replicas here (stand-ins for Kubernetes ones) and restarts share.
	return cfg, mgrtest.Config{Config: sandboxmgr.Config{Network: dockertest.Network(t), Labels: dockertest.ScopedLabels()},
		Runtime: mgrtest.Runtime{Records: dockertest.Records(t)}}
}

// waitIdleStop waits for sandbox id's container to stop after its last
// request: the decision comes within 1.5 x idle; docker stop then gives
// the app 10s to exit on SIGTERM (the test app does not).
func waitIdleStop(t *testing.T, id string, idle time.Duration) {
	t.Helper()
	cli := dockertest.Client(t)
	t0 := time.Now()
	for {
		c, err := cli.ContainerInspect(t.Context(), mgrtest.ContainerOf(t.Context(), cli, id))
		if err != nil {
			t.Fatal(err)
		}
		if !c.State.Running {
			break
		}
		if time.Since(t0) > 2*idle+15*time.Second {
			t.Fatalf("still running %v after the last request", time.Since(t0))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("stopped %v after the last request (idle_timeout %v, docker stop grace 10s)", time.Since(t0).Round(100*time.Millisecond), idle)
}

// The one gateway of a Docker engine: a sandbox whose app keeps its own
// traffic going still stops idle_timeout after its last request. Were its
// network counters read (as Docker replicas once did), it would never
// stop, and a sandbox could keep a running slot for good (#13: a sandbox
// may hurt only itself).
func TestDockerChattySandboxStopsIdle(t *testing.T) {
	cfg, mc := dockerReplicaConfig(t)
	idle := 3 * time.Second
	cfg.Templates["app"].IdleTimeout = config.Duration(idle)
	cfg.Templates["app"].Env = map[string]string{"CHATTER": "200ms"}
	mc.ReapEvery = 200 * time.Millisecond
	a := startReplica(t, cfg, mc)
	id := dockertest.UniqueID("chatty")
	tok := testkit.Mint(t, cfg, id, 5*time.Minute)
	wantStatus(t, testkit.Request(t, a.srv, "GET", "sandbox-"+id+"."+testDomain, "/", tok), 200)
	// The app's chatter moves the counters with no request in sight (so
	// this test fails if they are read).
	first := netBytes(t, id)
	testkit.WaitFor(t, "the chatty app's network counters to move", func() bool { return netBytes(t, id) > first })
	waitIdleStop(t, id, idle)
}

// netBytes is container id's network byte count (received and sent).
func netBytes(t *testing.T, id string) uint64 {
	t.Helper()
	resp, err := dockertest.Client(t).ContainerStatsOneShot(t.Context(), mgrtest.ContainerOf(t.Context(), dockertest.Client(t), id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, s := range st.Networks {
		n += s.RxBytes + s.TxBytes
	}
	return n
}

// kubeReplicas starts a kube-apiserver, a node agent and n replicas with
// the Kubernetes runtime.
func kubeReplicas(t *testing.T, n int) (*config.Config, []*replica, *k8stest.Cluster, string, *k8stest.Agent) {
	t.Helper()
	c := k8stest.Start(t)
	ns := fmt.Sprintf("pg-%s-%d", dockertest.RunID(), time.Now().UnixNano()%1e6)
	c.Namespace(t, ns)
	agent := k8stest.StartAgent(t, c.Admin(t), ns, dockertest.Network(t))
	cfg, _ := dockerReplicaConfig(t)
	mc := mgrtest.Config{Config: sandboxmgr.Config{Network: "previewgate-sandboxes",
		Labels: map[string]string{dockertest.LabelTest: "1", dockertest.LabelRun: dockertest.RunID()}},
		Runtime: mgrtest.Runtime{Kube: &kube.Config{Namespace: ns, REST: c.Config(c.AdminToken)}}}
	var rs []*replica
	for range n {
		rs = append(rs, startReplica(t, cfg, mc))
	}
	return cfg, rs, c, ns, agent
}

// Kubernetes, 3 replicas: 1,000 concurrent first requests make one pod
// (one container on the node), all answered 200; HTTP, WebSocket and SSE
// then flow browser -> gateway -> pod IP -> container.
func TestKubernetesGatewayHerdAndStreams(t *testing.T) {
	cfg, rs, c, ns, agent := kubeReplicas(t, 3)
	id := dockertest.UniqueID("kherd")
	t0 := time.Now()
	got := herd(t, cfg, rs, id, 1000)
	t.Logf("1000 first requests over 3 replicas in %v: %v", time.Since(t0).Round(time.Millisecond), got)
	if got[200] != 1000 {
		t.Errorf("got statuses %v, want 1000 x 200", got)
	}
	pods, err := c.Admin(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || agent.Containers() != 1 {
		t.Errorf("got %d pods and %d containers, want 1 and 1", len(pods.Items), agent.Containers())
	}

	host := "sandbox-" + id + "." + testDomain
	tok := testkit.Mint(t, cfg, id, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := dialSocket(ctx, rs[1].srv, host, tok)
	if err != nil {
		t.Fatalf("websocket through the gateway to the pod: %v", err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte("echo me")); err != nil {
		t.Fatal(err)
	}
	for {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("websocket read: %v", err)
		}
		if string(msg) == "echo me" {
			break
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")
	resp := testkit.Request(t, rs[2].srv, "GET", host, "/sse", tok, "Accept", "text/event-stream")
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if first, err := br.ReadString('\n'); err != nil || first != "id: 1\n" {
		t.Fatalf("sse: got first line %q (%v)", first, err)
	}
	if rest, _ := io.ReadAll(br); !strings.Contains(string(rest), "data: event 20") {
		t.Fatalf("sse stream incomplete: %q", rest)
	}
}
