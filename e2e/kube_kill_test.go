package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/k8stest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A gateway replica is a process; killing one (SIGKILL, as the OOM killer
// or a node loss does) while it creates a sandbox must leave neither an
// orphan nor a duplicate (#15). Replica A takes the first request and is
// killed while the pod it made is still starting (the app listens only
// after a delay); replica B, a separate process, then serves the sandbox
// from that same pod, and later stops it on idle, so nothing A made
// outlives the sandbox.
func TestKubernetesReplicaProcessKilledMidCreate(t *testing.T) {
	c := k8stest.Start(t)
	ns := fmt.Sprintf("pg-%s-%d", dockertest.RunID(), time.Now().UnixNano()%1e6)
	c.Namespace(t, ns)
	admin := c.Admin(t)
	agent := k8stest.StartAgent(t, admin, ns, dockertest.Network(t))
	image := dockertest.TestAppImage(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir, c)
	t.Setenv("TEST_JWT_SECRET", "test-secret-test-secret-test-secret-123")

	replica := func(name string) (addr string, p *gatewayProc) {
		addr = freePort(t)
		cfgFile := filepath.Join(dir, name+".yaml")
		os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
domain: preview.localhost
listen: {http: %q, admin: %q}
runtime:
  kind: kubernetes
  kubernetes: {namespace: %q, kubeconfig: %q, activity_every: 1s}
auth:
  audience: previewgate
  issuers: [test]
  keys: [{kid: k1, alg: HS256, secret: "${TEST_JWT_SECRET}"}]
default_template: app
templates:
  app:
    image: %q
    env: {LISTEN_DELAY: 4s}
    ready: {path: /, timeout: 60s}
    idle_timeout: 5s
`, addr, freePort(t), ns, kubeconfig, image)), 0o600)
		p = startProc(t, bin, append([]string{"serve", "--config", cfgFile}, labelArgs()...)...)
		p.waitFor(t, p.stderr, regexp.MustCompile(`previewgate serving`))
		return addr, p
	}
	addrA, a := replica("a")
	addrB, _ := replica("b")

	const id = "killed"
	out, err := exec.Command(bin, "token", "mint", "--config", filepath.Join(dir, "a.yaml"), "--sandbox", id).Output() // stdout: the token alone (stderr names the URL to open)
	if err != nil {
		t.Fatalf("token mint: %v %s", err, out)
	}
	tok := strings.TrimSpace(string(out))
	get := func(addr string) (int, error) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		req.Host = "sandbox-" + id + ".preview.localhost"
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "application/json") // no waiting page
		resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}

	go get(addrA) // dies with A
	sel := metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + id}
	testkit.WaitFor(t, "A's pod to exist", func() bool {
		pods, err := admin.CoreV1().Pods(ns).List(t.Context(), sel)
		return err == nil && len(pods.Items) > 0
	})
	pods, _ := admin.CoreV1().Pods(ns).List(t.Context(), sel)
	if podReadyNow(pods.Items[0].Status.Conditions) {
		t.Fatal("the pod was ready before A was killed: the test did not kill mid-create")
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	a.done <- nil
	uid := pods.Items[0].UID

	if code, err := get(addrB); err != nil || code != http.StatusOK {
		t.Fatalf("request through replica B after A was killed: %d %v, want 200", code, err)
	}
	pods, err = admin.CoreV1().Pods(ns).List(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].UID != uid || agent.Containers() != 1 {
		t.Fatalf("got %d pods (first %v, A made %v) and %d containers, want A's one pod",
			len(pods.Items), podUIDs(pods.Items), uid, agent.Containers())
	}

	// No orphan: B owns what A made and stops it on idle, Lease included.
	testkit.WaitFor(t, "B to stop the idle sandbox", func() bool {
		pods, err := admin.CoreV1().Pods(ns).List(t.Context(), sel)
		return err == nil && len(pods.Items) == 0 && agent.Containers() == 0 && !leaseExists(t, admin, ns, id)
	})
}

// writeKubeconfig writes a kubeconfig for c's admin token into dir.
func writeKubeconfig(t *testing.T, dir string, c *k8stest.Cluster) string {
	t.Helper()
	p := filepath.Join(dir, "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: admin}}]
current-context: test
`, c.URL, base64.StdEncoding.EncodeToString(c.CAData), c.AdminToken)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func leaseExists(t *testing.T, cs kubernetes.Interface, ns, id string) bool {
	list, err := cs.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items) > 0
}

func podReadyNow(conds []corev1.PodCondition) bool {
	for _, c := range conds {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podUIDs(pods []corev1.Pod) []types.UID {
	var uids []types.UID
	for _, p := range pods {
		uids = append(uids, p.UID)
	}
	return uids
}
