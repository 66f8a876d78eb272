package wire_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/internal/wire"
)

// TestRawConn (run without -race by .ci/run too: under the race detector
// rawConn uses net's own calls): the raw-syscall connection behaves as a net.Conn: full
// writes past a full socket buffer, EOF, deadlines as timeouts, closed
// connections as net.ErrClosed, concurrent reads and writes.
func TestRawConn(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := wire.NewRawConn(dialed, time.Minute)
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	defer peer.Close()

	// 8 MiB: far more than the socket buffers, so writes hit EAGAIN and
	// wait on the poller while the peer echoes slowly.
	big := bytes.Repeat([]byte("0123456789abcdef"), 512<<10)
	go io.Copy(peer, peer) // echo
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(big)
		werr <- err
	}()
	got := make([]byte, len(big))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("echoed bytes differ")
	}

	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past deadline: %v, want a timeout", err)
	}
	c.SetReadDeadline(time.Time{})

	peer.(*net.TCPConn).CloseWrite()
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read after peer's FIN: %d, %v; want EOF", n, err)
	}
	c.Close()
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v, want net.ErrClosed", err)
	}
}

// TestRawConnWriteTimeout: a write to a peer that stopped reading fails
// after the connection's write timeout; an explicit deadline wins over it
// while set, and clearing it hands writes back to the timeout.
func TestRawConnWriteTimeout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw connections are Linux-only")
	}
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			time.Sleep(time.Minute) // never reads
		}
	}()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := wire.NewRawConn(dialed, 300*time.Millisecond)
	defer c.Close()
	big := make([]byte, 64<<20)
	testkit.Within(t, 10*time.Second, "write to a peer that never reads", func() {
		if _, err := c.Write(big); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("got %v, want a deadline error", err)
		}
	})
	// An explicit deadline far away wins: the write runs past the timeout.
	c.SetWriteDeadline(time.Now().Add(time.Hour))
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(big)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("write with an explicit deadline an hour away ended early: %v", err)
	case <-time.After(time.Second):
	}
	c.SetWriteDeadline(time.Unix(1, 0)) // a cancellation reaches the write in flight
	testkit.Within(t, 5*time.Second, "cancel", func() { <-done })
	c.SetWriteDeadline(time.Time{})
	testkit.Within(t, 10*time.Second, "write after the explicit deadline was cleared", func() {
		if _, err := c.Write(big); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("got %v, want a deadline error", err)
		}
	})
}
