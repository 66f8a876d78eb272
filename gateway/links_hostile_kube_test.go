package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestKubernetesLinkDiesWithSandbox: TestDockerLinkDiesWithSandbox on a
// real API server: the pod deleted behind the gateway's back, the sandbox
// created again under its id, the old link refused.
func TestKubernetesLinkDiesWithSandbox(t *testing.T) {
	cfg, mc := kubeLinkSetup(t)
	cs := kubeAdmin(t, mc)
	var logs syncBuf
	r := startLinkReplica(t, cfg, mc, &logs)
	id := dockertest.UniqueID("kdie")
	host := "sandbox-" + id + "." + testDomain
	create := func() {
		if resp, _ := get(t, r.srv, host, "/", "Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute)); resp.StatusCode != 200 {
			t.Fatalf("create: got %d, want 200", resp.StatusCode)
		}
	}
	create()
	pq, _ := mintLink(t, r.admin.URL, id, `{"ttl":"10m","path":"/docs"}`)
	resp, _ := get(t, r.srv, host, pq)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("open link: got %d", resp.StatusCode)
	}
	cookie := resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(mc.Kube.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + id})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of %s: %d %v", id, len(pods.Items), err)
	}
	zero := int64(0)
	for _, p := range pods.Items {
		if err := cs.CoreV1().Pods(mc.Kube.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the pod is gone", func() bool {
		l, err := cs.CoreV1().Pods(mc.Kube.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + id})
		return err == nil && len(l.Items) == 0
	})
	create()
	if resp, body := get(t, r.srv, host, "/docs", "Cookie", cookie); resp.StatusCode == 200 && !strings.Contains(body, "link_") {
		t.Errorf("the removed sandbox's link on the new one: got %d %.200s, want refused", resp.StatusCode, body)
	}
}
