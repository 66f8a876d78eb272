package wire

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestIdleReadable: an idle connection is readable once its peer sent a
// byte or closed, not before, and the peek consumes nothing; the same on
// a raw connection (its own peek) and on a plain TCP one (SyscallConn).
// A pool reuses a connection only while this says false (upstream
// invariant 4).
func TestIdleReadable(t *testing.T) {
	for _, raw := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		dialed, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		peer, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c := dialed
		if raw {
			c = NewRawConn(dialed, time.Minute)
			if _, ok := c.(*rawConn); !ok {
				t.Fatalf("NewRawConn returned %T", c)
			}
		}
		if IdleReadable(c) {
			t.Fatalf("raw=%v: readable before the peer sent anything", raw)
		}
		if _, err := peer.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		waitReadable(t, c, raw)
		if !IdleReadable(c) { // a second look still sees the byte
			t.Fatalf("raw=%v: the peek consumed the byte", raw)
		}
		var b [1]byte
		if n, err := c.Read(b[:]); n != 1 || b[0] != 'x' || err != nil {
			t.Fatalf("raw=%v: read after peek: %d %q %v", raw, n, b[:n], err)
		}
		if IdleReadable(c) {
			t.Fatalf("raw=%v: readable after the byte was read", raw)
		}
		peer.Close()
		waitReadable(t, c, raw)
		if n, err := c.Read(b[:]); n != 0 || err != io.EOF {
			t.Fatalf("raw=%v: read after the peer closed: %d %v", raw, n, err)
		}
		c.Close()
	}
}

// waitReadable waits until IdleReadable(c) (loopback delivers at once,
// but the test does not time it).
func waitReadable(t *testing.T, c net.Conn, raw bool) {
	t.Helper()
	for range 1000 {
		if IdleReadable(c) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("raw=%v: never readable", raw)
}
