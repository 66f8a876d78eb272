package kube

import (
	"context"
	"maps"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	netv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The sandboxes' NetworkPolicy, kept by the gateway (#26): ingress only
// from the gateway's pods and GatewayCIDRs, so sandboxes reach neither each
// other nor anything in the cluster; egress ("internet", the default): DNS
// anywhere and the public internet, no private, shared, link-local or
// loopback range (no cluster service, node, kubelet, gateway or cloud
// metadata endpoint). EgressAllow adds ranges; "none" allows DNS only;
// "open" leaves egress to the cluster. The policy is labelled
// previewgate.managed=true and kept in step with the config at every
// start; an operator who removes that label owns it.

// privateRanges are the destinations egress "internet" never reaches.
var privateRanges = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
}

// privateRanges6 are IPv6's private ranges and those that carry IPv4 via
// a translator: the local NAT64 prefix, 6to4 and Teredo whole, and in the
// well-known NAT64 prefix exactly the private IPv4 ranges (hostile5).
var privateRanges6 = append([]string{"::1/128", "fc00::/7", "fe80::/10", "ff00::/8",
	"64:ff9b:1::/48", "2002::/16", "2001::/32"}, nat64(privateRanges)...)

// nat64 returns IPv4 ranges as they appear in the well-known NAT64 prefix
// 64:ff9b::/96 (RFC 6052).
func nat64(v4 []string) []string {
	out := make([]string, 0, len(v4))
	for _, c := range v4 {
		p := netip.MustParsePrefix(c)
		a := netip.MustParseAddr("64:ff9b::").As16()
		b := p.Addr().As4()
		copy(a[12:], b[:])
		out = append(out, netip.PrefixFrom(netip.AddrFrom16(a), 96+p.Bits()).String())
	}
	return out
}

func (e *Runtime) policy(name string, lbls map[string]string) *netv1.NetworkPolicy {
	from := []netv1.NetworkPolicyPeer{{
		PodSelector:       &metav1.LabelSelector{MatchLabels: e.kc.GatewayLabels},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.kc.GatewayNamespace}},
	}}
	for _, c := range e.kc.GatewayCIDRs {
		from = append(from, netv1.NetworkPolicyPeer{IPBlock: &netv1.IPBlock{CIDR: c}})
	}
	np := &netv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: maps.Clone(lbls)},
		Spec: netv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: maps.Clone(lbls)},
			PolicyTypes: []netv1.PolicyType{netv1.PolicyTypeIngress},
			Ingress:     []netv1.NetworkPolicyIngressRule{{From: from}},
		},
	}
	if e.kc.Egress == EgressOpen {
		return np
	}
	np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, netv1.PolicyTypeEgress)
	udp, tcp, dns := corev1.ProtocolUDP, corev1.ProtocolTCP, intstr.FromInt32(53)
	np.Spec.Egress = []netv1.NetworkPolicyEgressRule{{Ports: []netv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}}}}
	var to []netv1.NetworkPolicyPeer
	if e.kc.Egress != EgressNone {
		to = append(to,
			netv1.NetworkPolicyPeer{IPBlock: &netv1.IPBlock{CIDR: "0.0.0.0/0", Except: privateRanges}},
			netv1.NetworkPolicyPeer{IPBlock: &netv1.IPBlock{CIDR: "::/0", Except: privateRanges6}})
	}
	for _, c := range e.kc.EgressAllow {
		to = append(to, netv1.NetworkPolicyPeer{IPBlock: &netv1.IPBlock{CIDR: c}})
	}
	if len(to) > 0 {
		np.Spec.Egress = append(np.Spec.Egress, netv1.NetworkPolicyEgressRule{To: to})
	}
	return np
}

// Egress modes (Config.Egress).
const (
	EgressInternet = "internet"
	EgressNone     = "none"
	EgressOpen     = "open"
)

// Isolate makes the sandboxes' NetworkPolicy exist as the config says, or
// brings a managed one in step with it (RBAC: get, create, update).
func (e *Runtime) Isolate(ctx context.Context, name string, lbls map[string]string) error {
	np := e.policy(name, lbls)
	cur, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = e.cs.NetworkingV1().NetworkPolicies(e.ns).Create(ctx, np, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // a replica made it meanwhile; the next start checks it
		}
		return kclassify("create network policy "+name, err, nil)
	case err != nil:
		return kclassify("get network policy "+name, err, nil)
	case cur.Labels[runtime.LabelManaged] != "true":
		return nil // the operator's now
	case equality.Semantic.DeepEqual(cur.Spec, np.Spec):
		return nil
	}
	cur.Spec = np.Spec
	_, err = e.cs.NetworkingV1().NetworkPolicies(e.ns).Update(ctx, cur, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil // changed meanwhile (a replica's update): the next start checks it
	}
	return kclassify("update network policy "+name, err, nil)
}

// Capabilities: no image store (the kubelet pulls), no pause; Leases for
// activity and locks, PersistentVolumeClaims for workspaces, pod logs.
func (e *Runtime) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Activity: e, Logs: e, Workspaces: true, Locks: e, SharedPool: true}
}

// Close releases nothing: client-go's clients hold no resources to close.
func (e *Runtime) Close() error { return nil }
