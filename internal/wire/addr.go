package wire

import "net/netip"

// IPKey is the per-client key: the address, or its /64 for IPv6, since a
// single host commonly holds a whole /64 and could rotate through it.
func IPKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// NormAddr drops an IPv4-in-IPv6 mapping and a zone, so one host is one key.
func NormAddr(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }
