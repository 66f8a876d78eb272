package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
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
	c := newRawConn(dialed)
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
