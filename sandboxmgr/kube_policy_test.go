package sandboxmgr_test

import (
	"slices"
	"testing"

	netv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestKubernetesSandboxPolicy (#26, 6): the sandboxes' NetworkPolicy the
// gateway makes closes egress to private, link-local and metadata ranges
// but allows DNS and the internet, and a start with other gateway labels
// or an off-cluster gateway's CIDR brings it in step; an operator's own
// policy (without previewgate.managed) is left alone.
func TestKubernetesSandboxPolicy(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	cfg := e.config()
	e.manager(t, cfg)
	np := e.policy(t, cfg.Network)
	if !slices.Contains(np.Spec.PolicyTypes, netv1.PolicyTypeEgress) {
		t.Fatalf("got policy types %v, want egress closed", np.Spec.PolicyTypes)
	}
	var dns bool
	var except []string
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			dns = dns || p.Port != nil && p.Port.IntValue() == 53
		}
		for _, to := range r.To {
			if to.IPBlock != nil && to.IPBlock.CIDR == "0.0.0.0/0" {
				except = to.IPBlock.Except
			}
		}
	}
	if !dns {
		t.Error("DNS is not allowed")
	}
	for _, must := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"} {
		if !slices.Contains(except, must) {
			t.Errorf("egress reaches %s (except list %v)", must, except)
		}
	}

	cfg.Kubernetes.GatewayLabels = map[string]string{"app": "edge"}
	cfg.Kubernetes.GatewayCIDRs = []string{"203.0.113.0/24"}
	e.manager(t, cfg)
	np = e.policy(t, cfg.Network)
	from := np.Spec.Ingress[0].From
	if len(from) != 2 || from[0].PodSelector.MatchLabels["app"] != "edge" || from[1].IPBlock == nil || from[1].IPBlock.CIDR != "203.0.113.0/24" {
		t.Fatalf("got ingress from %+v, want the new gateway labels and the off-cluster CIDR", from)
	}

	np.Labels = map[string]string{"owner": "ops"}
	np.Spec.Egress = nil
	if _, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Update(t.Context(), np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.manager(t, cfg)
	if got := e.policy(t, cfg.Network); len(got.Spec.Egress) != 0 {
		t.Errorf("the operator's policy was rewritten: %+v", got.Spec.Egress)
	}
}

func (e *kubeEnv) policy(t *testing.T, name string) *netv1.NetworkPolicy {
	t.Helper()
	np, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get policy %s: %v", name, err)
	}
	return np
}

var _ = runtime.LabelManaged
