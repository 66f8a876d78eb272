package sandboxmgr_test

import (
	"net/netip"
	"testing"

	netv1 "k8s.io/api/networking/v1"
)

// TestKubernetesSandboxPolicyIPv6Embeddings (hostile5): egress "internet"
// closes private IPv4 ranges, and must not reopen them through IPv6
// addresses that carry an IPv4 one. On an IPv6-only cluster, egress to
// IPv4 goes through NAT64 (64:ff9b::/96, RFC 6052; 64:ff9b:1::/48, RFC
// 8215): 64:ff9b::a00:5 is 10.0.0.5 once translated, so a policy that
// allows ::/0 minus only IPv6's own private ranges lets a sandbox reach
// the nodes, the kubelet, the API server and the cloud metadata endpoint
// by their NAT64 names. 6to4 (2002::/16) and Teredo (2001::/32) embed
// IPv4 addresses too. The policy is the one the real API server stored.
func TestKubernetesSandboxPolicyIPv6Embeddings(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	cfg := e.config()
	e.manager(t, cfg)
	np := e.policy(t, cfg.Network)
	for _, dst := range []string{
		"64:ff9b::a00:5",      // 10.0.0.5
		"64:ff9b::a9fe:a9fe",  // 169.254.169.254
		"64:ff9b::ac10:1",     // 172.16.0.1
		"64:ff9b::c0a8:101",   // 192.168.1.1
		"64:ff9b::7f00:1",     // 127.0.0.1
		"64:ff9b::6440:1",     // 100.64.0.1
		"64:ff9b:1::a00:5",    // local-use NAT64 prefix
		"2002:a00:5::1",       // 6to4 of 10.0.0.5
		"2001:0:a9fe:a9fe::1", // Teredo
	} {
		if egressAllows(np, netip.MustParseAddr(dst)) {
			t.Errorf("egress reaches %s, an IPv4 private address in IPv6 clothes", dst)
		}
	}
	for _, dst := range []string{"64:ff9b::808:808", "2606:4700::1111", "8.8.8.8"} {
		if !egressAllows(np, netip.MustParseAddr(dst)) {
			t.Errorf("egress no longer reaches the internet address %s", dst)
		}
	}
}

// egressAllows reports whether np lets a pod open TCP port 443 to dst, as
// a NetworkPolicy implementation reads its egress rules.
func egressAllows(np *netv1.NetworkPolicy, dst netip.Addr) bool {
	for _, r := range np.Spec.Egress {
		if !portAllows(r.Ports, 443) {
			continue
		}
		if len(r.To) == 0 {
			return true
		}
		for _, to := range r.To {
			if to.IPBlock != nil && ipBlockHas(to.IPBlock, dst) {
				return true
			}
		}
	}
	return false
}

func portAllows(ports []netv1.NetworkPolicyPort, port int) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.IntValue() == port {
			return true
		}
	}
	return false
}

func ipBlockHas(b *netv1.IPBlock, dst netip.Addr) bool {
	if !netip.MustParsePrefix(b.CIDR).Contains(dst) {
		return false
	}
	for _, x := range b.Except {
		if netip.MustParsePrefix(x).Contains(dst) {
			return false
		}
	}
	return true
}
