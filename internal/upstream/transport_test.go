package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
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

// confirmFunc is a Confirmer that counts its calls.
type confirmFunc struct {
	calls atomic.Int32
	err   error
}

func (c *confirmFunc) Confirm(ctx context.Context, instance, addr string) error {
	c.calls.Add(1)
	return c.err
}

// TestConfirmNewOnly (invariant 10): a new connection is confirmed once,
// after it was made and before any byte goes out; a reused one is not
// confirmed again; an unconfirmed one carries nothing and fails the
// exchange with ErrUnconfirmed and the Confirmer's error.
func TestConfirmNewOnly(t *testing.T) {
	var asked atomic.Int32
	u := newScriptedUpstream(t, func(_, _ int) string {
		asked.Add(1)
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	})
	p := NewPool()
	ctx := context.Background()
	var c confirmFunc
	req := func() *Request {
		return &Request{Instance: "inst", Addr: u.addr, Method: http.MethodGet, Path: "/", Host: "app", Confirm: &c}
	}
	for i := range 3 {
		resp, err := p.Exchange(ctx, req())
		if err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
		if body := readAll(t, resp); body != "ok" {
			t.Fatalf("exchange %d: body %q", i, body)
		}
		Release(resp)
	}
	if n, a := c.calls.Load(), u.accepts.Load(); n != 1 || a != 1 {
		t.Fatalf("3 exchanges on %d connection(s) made %d confirmations, want 1 on 1 (reused connections are not confirmed)", a, n)
	}

	fresh := req()
	fresh.Fresh = true
	c.err = errors.New("not that instance")
	_, err := p.Exchange(ctx, fresh)
	if !errors.Is(err, ErrUnconfirmed) || !errors.Is(err, c.err) {
		t.Fatalf("unconfirmed connection: err %v, want ErrUnconfirmed wrapping the Confirmer's", err)
	}
	// The server saw the connection (made before it was confirmed) but
	// no request on it.
	testkit.WaitFor(t, "the second connection", func() bool { return u.accepts.Load() == 2 })
	time.Sleep(50 * time.Millisecond)
	if n := asked.Load(); n != 3 {
		t.Fatalf("the upstream read %d requests, want 3: the unconfirmed connection carried one", n)
	}
}
