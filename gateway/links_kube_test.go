package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/k8stest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
)

// Settings and share links (#23) with two replicas on one real API server:
// the records are ConfigMaps.

func TestKubernetesPublicToggleTwoReplicas(t *testing.T) {
	cfg, mc := kubeLinkSetup(t)
	publicToggle(t, cfg, mc)
}

func TestKubernetesShareLinks(t *testing.T) {
	cfg, mc := kubeLinkSetup(t)
	cs := kubeAdmin(t, mc)
	shareLinks(t, cfg, mc, func(id string) int {
		list, err := cs.CoreV1().ConfigMaps(mc.Kube.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: records.LabelRecord + "=" + id})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	})
}

// kubeLinkSetup is linkSetup on a real API server (one namespace).
func kubeLinkSetup(t *testing.T) (*config.Config, mgrtest.Config) {
	c := k8stest.Start(t)
	ns := c.NewNamespace(t)
	k8stest.StartAgent(t, c.Admin(t), ns, dockertest.Network(t))
	cfg, _ := linkSetup(t)
	mc := mgrtest.Config{Config: sandboxmgr.Config{Network: "previewgate-sandboxes",
		Labels: map[string]string{dockertest.LabelTest: "1", dockertest.LabelRun: dockertest.RunID()}, RecheckEvery: time.Second},
		Runtime: mgrtest.Runtime{Kube: &kube.Config{Namespace: ns, REST: c.Config(c.AdminToken)}}}
	kubeClusters.Store(ns, c)
	return cfg, mc
}

var kubeClusters sync.Map // namespace → *k8stest.Cluster

func kubeAdmin(t *testing.T, mc mgrtest.Config) kubernetes.Interface {
	c, _ := kubeClusters.Load(mc.Kube.Namespace)
	return c.(*k8stest.Cluster).Admin(t)
}

// TestKubernetesStreamsEndWithGrant: streams end with their grant on two
// replicas whose records are ConfigMaps (grants_docker_test.go).
func TestKubernetesStreamsEndWithGrant(t *testing.T) {
	cfg, mc := kubeLinkSetup(t)
	streamsEndWithGrant(t, cfg, mc)
}
