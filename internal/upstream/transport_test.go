package upstream

import (
	"context"
	"net"
	"testing"
)

// TestPoolPerAddress: within one instance, a connection to one port is
// never handed out for another (invariant 1, #22).
func TestPoolPerAddress(t *testing.T) {
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
			}
		}()
		addrs = append(addrs, ln.Addr().String())
	}
	p := NewPool()
	ctx := context.Background()
	a, _, err := p.get(ctx, &Request{Instance: "inst", Addr: addrs[0]})
	if err != nil {
		t.Fatal(err)
	}
	p.put(a)
	b, reused, err := p.get(ctx, &Request{Instance: "inst", Addr: addrs[1]})
	if err != nil {
		t.Fatal(err)
	}
	if reused || b.Net.RemoteAddr().String() != addrs[1] {
		t.Fatalf("Get for %s: got a connection to %s (reused %v), want a new one to %s", addrs[1], b.Net.RemoteAddr(), reused, addrs[1])
	}
	p.put(b)
	for i, addr := range []string{addrs[0], addrs[1]} {
		c, reused, err := p.get(ctx, &Request{Instance: "inst", Addr: addr})
		if err != nil {
			t.Fatal(err)
		}
		if !reused || c.Net.RemoteAddr().String() != addr {
			t.Errorf("Get %d for %s: got %s (reused %v), want the idle connection to %s", i, addr, c.Net.RemoteAddr(), reused, addr)
		}
	}
}
