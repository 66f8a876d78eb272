package wire

import (
	"net"
	"net/netip"
	"strconv"
)

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

// PortAddr is the address of port on the host of addr (a sandbox's
// endpoint: its IP, that port); port 0 is addr itself.
func PortAddr(addr string, port int) string {
	if port == 0 {
		return addr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}
