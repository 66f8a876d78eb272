package wire

import (
	"net/http"
	"net/netip"
	"strings"
)

// Addrs holds a request's socket peer and client address once parsed,
// for a request path that needs them in several places (the gateway: its
// rate limits, exchange cap and traffic log; #25). The zero value is
// ready; it serves one request, from one goroutine.
type Addrs struct {
	peer, client         netip.Addr
	havePeer, haveClient bool
}

// Peer is PeerAddr(r.RemoteAddr).
func (a *Addrs) Peer(r *http.Request) netip.Addr {
	if !a.havePeer {
		a.peer, a.havePeer = PeerAddr(r.RemoteAddr), true
	}
	return a.peer
}

// Client is ClientIPFrom(a.Peer(r), r, trusted); trusted must not change
// between calls.
func (a *Addrs) Client(r *http.Request, trusted []netip.Prefix) netip.Addr {
	if !a.haveClient {
		a.client, a.haveClient = ClientIPFrom(a.Peer(r), r, trusted), true
	}
	return a.client
}

// ClientIPFrom returns the address a request came from: peer (its parsed
// RemoteAddr, PeerAddr), or, when peer is one of the trusted proxies, the
// right-most address in X-Forwarded-For (or, without that header, RFC 7239
// Forwarded "for=") that is not itself a trusted proxy. Headers from untrusted peers are ignored
// entirely: anyone can send them.
//
// The walk goes from the right because each proxy appends what it saw; only
// the entries our own proxies appended can be believed. A malformed entry
// (or Forwarded's "unknown" / obfuscated node) stops the walk and the last
// address that parsed wins, so garbage cannot smuggle a chosen address in.
//
// X-Forwarded-For is preferred when both headers are present because it is
// what common proxies (nginx, ELBs, CDNs) set; a proxy in front of the
// gateway that sets only Forwarded must not pass a client's X-Forwarded-For
// through unchanged.
//
// The result is always a valid address without zone, IPv4 unmapped; an
// unparsable peer (not a TCP socket) reads as 0.0.0.0.
func ClientIPFrom(peer netip.Addr, r *http.Request, trusted []netip.Prefix) netip.Addr {
	if !isTrusted(peer, trusted) {
		return peer
	}
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		return walkXFF(peer, xff, trusted)
	}
	if fwd := r.Header.Values("Forwarded"); len(fwd) > 0 {
		return walkForwarded(peer, fwd, trusted)
	}
	return peer
}

// PeerAddr parses a RemoteAddr ("ip:port", "[ip6]:port"): IPv4 unmapped,
// without zone, 0.0.0.0 when it does not parse.
func PeerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return NormAddr(ap.Addr())
	}
	if a, ok := parseNode(remote); ok {
		return a
	}
	return netip.IPv4Unspecified()
}

// Trusted reports whether a, a peer address as PeerAddr returns it, is
// one of the trusted proxies: whether what it says of a request (client
// address, request id) may be believed.
func Trusted(a netip.Addr, trusted []netip.Prefix) bool { return isTrusted(a, trusted) }

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// walkXFF walks comma-separated X-Forwarded-For lists from the right.
// Repeated header lines form one list in order.
func walkXFF(last netip.Addr, lines []string, trusted []netip.Prefix) netip.Addr {
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		for {
			elem := s
			comma := strings.LastIndexByte(s, ',')
			if comma >= 0 {
				elem, s = s[comma+1:], s[:comma]
			}
			elem = TrimOWS(elem)
			if elem == "" {
				// Empty list elements carry nothing (RFC 9110, 5.6.1).
				if comma < 0 {
					break
				}
				continue
			}
			a, ok := parseNode(elem)
			if !ok {
				return last
			}
			if !isTrusted(a, trusted) {
				return a
			}
			last = a
			if comma < 0 {
				break
			}
		}
	}
	return last
}

// parseNode parses one hop: "1.2.3.4", "1.2.3.4:80", "2001:db8::1",
// "[2001:db8::1]" or "[2001:db8::1]:80".
func parseNode(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return NormAddr(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return NormAddr(ap.Addr()), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return NormAddr(a), true
		}
	}
	return netip.Addr{}, false
}

// fwdHop is the "for" node of one Forwarded element.
type fwdHop struct {
	addr netip.Addr
	ok   bool // false: missing, "unknown", obfuscated or malformed
}

// walkForwarded walks RFC 7239 Forwarded elements from the right. Quoted
// strings may hold commas and semicolons, so each line is scanned forward
// once into its hops, then walked backward.
func walkForwarded(last netip.Addr, lines []string, trusted []netip.Prefix) netip.Addr {
	var buf [16]fwdHop
	for i := len(lines) - 1; i >= 0; i-- {
		hops, ok := forwardedHops(lines[i], buf[:0])
		if !ok {
			// An unterminated quote: the line's structure is unknown, so no
			// hop in it can be trusted.
			return last
		}
		for j := len(hops) - 1; j >= 0; j-- {
			h := hops[j]
			if !h.ok {
				return last
			}
			if !isTrusted(h.addr, trusted) {
				return h.addr
			}
			last = h.addr
		}
	}
	return last
}

// forwardedHops splits one Forwarded line into elements and returns each
// element's "for" node. Empty elements are skipped (RFC 9110 lists allow
// them). ok is false on an unterminated quoted string.
func forwardedHops(s string, hops []fwdHop) ([]fwdHop, bool) {
	var (
		hop   fwdHop
		bad   bool // the element has a malformed pair
		empty = true
	)
	flush := func() {
		if !empty {
			if bad {
				hop.ok = false
			}
			hops = append(hops, hop)
		}
		hop, bad, empty = fwdHop{}, false, true
	}
	for {
		s = TrimOWS(s)
		if s == "" {
			flush()
			return hops, true
		}
		switch s[0] {
		case ',':
			flush()
			s = s[1:]
			continue
		case ';':
			s = s[1:]
			continue
		}
		// One pair: token "=" (token | quoted-string).
		empty = false
		eq := strings.IndexAny(s, "=,;")
		if eq < 0 || s[eq] != '=' {
			bad = true
			if eq < 0 {
				eq = len(s)
			}
			s = s[eq:]
			continue
		}
		name := TrimOWS(s[:eq])
		s = TrimOWS(s[eq+1:])
		var val string
		if len(s) > 0 && s[0] == '"' {
			v, rest, ok := unquote(s)
			if !ok {
				return hops, false
			}
			val, s = v, TrimOWS(rest)
			if s != "" && s[0] != ',' && s[0] != ';' {
				bad = true // junk after a quoted value
			}
		}
		if val == "" || bad {
			end := strings.IndexAny(s, ",;")
			if end < 0 {
				end = len(s)
			}
			if val == "" {
				val = TrimOWS(s[:end])
			}
			s = s[end:]
		}
		if strings.EqualFold(name, "for") {
			hop.addr, hop.ok = parseNode(val)
		}
	}
}

// unquote reads a quoted-string at the start of s (s[0] == '"') and returns
// its value and the rest. It allocates only when the value has escapes.
func unquote(s string) (val, rest string, ok bool) {
	esc := false
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			esc = true
			i++
		case '"':
			v := s[1:i]
			if esc {
				var b strings.Builder
				for j := 0; j < len(v); j++ {
					if v[j] == '\\' && j+1 < len(v) {
						j++
					}
					b.WriteByte(v[j])
				}
				v = b.String()
			}
			return v, s[i+1:], true
		}
	}
	return "", "", false
}
