package wire

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// ClientIP is ClientIPFrom for r's own RemoteAddr.
func ClientIP(r *http.Request, trusted []netip.Prefix) netip.Addr {
	return ClientIPFrom(PeerAddr(r.RemoteAddr), r, trusted)
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name   string
		remote string
		xff    []string
		fwd    []string
		want   string
	}{
		{"peer only", "203.0.113.9:1234", nil, nil, "203.0.113.9"},
		{"ipv6 peer", "[2001:db8::1]:443", nil, nil, "2001:db8::1"},
		{"mapped peer", "[::ffff:203.0.113.9]:1", nil, nil, "203.0.113.9"},
		{"zoned peer", "[fe80::1%eth0]:1", nil, nil, "fe80::1"},
		{"unparsable peer", "@", nil, nil, "0.0.0.0"},
		{"untrusted peer ignores xff", "203.0.113.9:1", []string{"1.1.1.1"}, nil, "203.0.113.9"},
		{"untrusted peer ignores forwarded", "203.0.113.9:1", nil, []string{"for=1.1.1.1"}, "203.0.113.9"},
		{"trusted peer no header", "10.1.2.3:1", nil, nil, "10.1.2.3"},
		{"trusted peer xff", "10.1.2.3:1", []string{"198.51.100.7"}, nil, "198.51.100.7"},
		{"right-most untrusted wins", "10.1.2.3:1", []string{"6.6.6.6, 198.51.100.7, 10.0.0.2"}, nil, "198.51.100.7"},
		{"spoofed left part ignored", "10.1.2.3:1", []string{"1.2.3.4, 5.6.7.8"}, nil, "5.6.7.8"},
		{"repeated lines form one list", "10.1.2.3:1", []string{"6.6.6.6, 198.51.100.7", "10.0.0.2"}, nil, "198.51.100.7"},
		{"all trusted takes left-most", "10.1.2.3:1", []string{"10.0.0.5, 10.0.0.2"}, nil, "10.0.0.5"},
		{"malformed stops walk", "10.1.2.3:1", []string{"6.6.6.6, bogus, 10.0.0.2"}, nil, "10.0.0.2"},
		{"malformed right-most keeps peer", "10.1.2.3:1", []string{"6.6.6.6, nonsense"}, nil, "10.1.2.3"},
		{"empty elements skipped", "10.1.2.3:1", []string{"198.51.100.7, , "}, nil, "198.51.100.7"},
		{"xff with port", "10.1.2.3:1", []string{"198.51.100.7:5555"}, nil, "198.51.100.7"},
		{"xff bracketed v6", "10.1.2.3:1", []string{"[2001:db8::7]"}, nil, "2001:db8::7"},
		{"xff v6 with port", "10.1.2.3:1", []string{"[2001:db8::7]:80"}, nil, "2001:db8::7"},
		{"xff no spaces", "10.1.2.3:1", []string{"6.6.6.6,198.51.100.7"}, nil, "198.51.100.7"},
		{"xff preferred over forwarded", "10.1.2.3:1", []string{"198.51.100.7"}, []string{"for=6.6.6.6"}, "198.51.100.7"},
		{"v6 trusted proxy", "[fd00::1]:1", []string{"198.51.100.7, fd00::2"}, nil, "198.51.100.7"},
		{"forwarded simple", "10.1.2.3:1", nil, []string{"for=198.51.100.7"}, "198.51.100.7"},
		{"forwarded params", "10.1.2.3:1", nil, []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60"},
		{"forwarded quoted v6 port", "10.1.2.3:1", nil, []string{`for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"forwarded case insensitive", "10.1.2.3:1", nil, []string{"For=198.51.100.7"}, "198.51.100.7"},
		{"forwarded right-most", "10.1.2.3:1", nil, []string{"for=6.6.6.6, for=198.51.100.7;proto=https, for=10.0.0.9"}, "198.51.100.7"},
		{"forwarded lines", "10.1.2.3:1", nil, []string{"for=6.6.6.6", "for=198.51.100.7"}, "198.51.100.7"},
		{"forwarded quoted comma", "10.1.2.3:1", nil, []string{`for=6.6.6.6, for=198.51.100.7;ext="a,b;c"`}, "198.51.100.7"},
		{"forwarded escaped quote", "10.1.2.3:1", nil, []string{`for=198.51.100.7;ext="a\"b,"`}, "198.51.100.7"},
		{"forwarded unknown stops", "10.1.2.3:1", nil, []string{"for=6.6.6.6, for=unknown, for=10.0.0.9"}, "10.0.0.9"},
		{"forwarded obfuscated stops", "10.1.2.3:1", nil, []string{"for=6.6.6.6, for=_hidden"}, "10.1.2.3"},
		{"forwarded missing for stops", "10.1.2.3:1", nil, []string{"for=6.6.6.6, proto=https"}, "10.1.2.3"},
		{"forwarded unterminated quote", "10.1.2.3:1", nil, []string{`for=6.6.6.6, for="198.51.100.7`}, "10.1.2.3"},
		{"forwarded junk after quote", "10.1.2.3:1", nil, []string{`for=6.6.6.6, for="198.51.100.7"x`}, "10.1.2.3"},
		{"forwarded pair without value", "10.1.2.3:1", nil, []string{"for=6.6.6.6, secret;for=198.51.100.7"}, "10.1.2.3"},
		{"forwarded empty elements", "10.1.2.3:1", nil, []string{"for=198.51.100.7,,"}, "198.51.100.7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range tc.fwd {
				r.Header.Add("Forwarded", v)
			}
			if got := ClientIP(r, trusted); got != netip.MustParseAddr(tc.want) {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
		})
	}
}

func TestClientIPNoTrustedProxies(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:1"
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	if got := ClientIP(r, nil); got != netip.MustParseAddr("10.1.2.3") {
		t.Fatalf("got %v, want the peer 10.1.2.3", got)
	}
}

func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:80", "1.2.3.4, 10.0.0.2", "")
	f.Add("10.0.0.1:80", "", `for="[2001:db8::1]:80";proto=https, for=10.0.0.3`)
	f.Add("10.0.0.1:80", "", `for="\"", for=unknown,,;;=`)
	f.Add("[fd00::1]:1", "[::1], ::ffff:1.2.3.4,", "")
	f.Add("203.0.113.1:5", "1.1.1.1", "for=2.2.2.2")
	f.Add("garbage", ",,,", `"`)
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	f.Fuzz(func(t *testing.T, remote, xff, fwd string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{}}
		if xff != "" {
			r.Header["X-Forwarded-For"] = []string{xff}
		}
		if fwd != "" {
			r.Header["Forwarded"] = []string{fwd}
		}
		got := ClientIP(r, trusted)
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("ClientIP(%q, %q, %q) = %v, want a valid unzoned unmapped address", remote, xff, fwd, got)
		}
		if peer := PeerAddr(remote); !isTrusted(peer, trusted) && got != peer {
			t.Fatalf("untrusted peer %v: got %v from headers", peer, got)
		}
	})
}

func BenchmarkClientIP(b *testing.B) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	cases := []struct {
		name, remote, hdr, val string
	}{
		{"peer", "203.0.113.9:1234", "", ""},
		{"xff", "10.1.2.3:1234", "X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.0.0.2"},
		{"forwarded", "10.1.2.3:1234", "Forwarded", "for=6.6.6.6, for=198.51.100.7;proto=https, for=10.0.0.2"},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			r := &http.Request{RemoteAddr: bc.remote, Header: http.Header{}}
			if bc.hdr != "" {
				r.Header.Set(bc.hdr, bc.val)
			}
			b.ReportAllocs()
			for b.Loop() {
				if !ClientIP(r, trusted).IsValid() {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// TestPortAddr: a port host's address is the endpoint's IP with that
// port; port 0 (the template's own) is the endpoint itself.
func TestPortAddr(t *testing.T) {
	for _, tt := range []struct {
		addr string
		port int
		want string
	}{
		{"10.0.0.2:3000", 0, "10.0.0.2:3000"},
		{"10.0.0.2:3000", 5173, "10.0.0.2:5173"},
		{"[fd00::2]:3000", 8080, "[fd00::2]:8080"},
		{"not an address", 8080, "not an address"},
	} {
		if got := PortAddr(tt.addr, tt.port); got != tt.want {
			t.Errorf("PortAddr(%q, %d) = %q, want %q", tt.addr, tt.port, got, tt.want)
		}
	}
}

// Addrs answers as PeerAddr and ClientIP do, read in either order and
// more than once.
func TestAddrs(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, c := range []struct{ remote, xff string }{
		{"192.0.2.1:5", ""}, {"10.1.2.3:5", "198.51.100.7"}, {"10.1.2.3:5", ""}, {"[::ffff:10.0.0.1]:5", "203.0.113.9, 10.0.0.2"}, {"junk", ""},
	} {
		r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}}
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		wantPeer, wantClient := PeerAddr(c.remote), ClientIP(r, trusted)
		var a, b Addrs
		if got := a.Client(r, trusted); got != wantClient || a.Client(r, trusted) != wantClient || a.Peer(r) != wantPeer {
			t.Errorf("%+v: client then peer: got %v %v, want %v %v", c, got, a.Peer(r), wantClient, wantPeer)
		}
		if got := b.Peer(r); got != wantPeer || b.Client(r, trusted) != wantClient {
			t.Errorf("%+v: peer then client: got %v %v, want %v %v", c, got, b.Client(r, trusted), wantPeer, wantClient)
		}
	}
}
