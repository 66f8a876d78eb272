package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawPair returns a raw client connection and the peer's end.
func rawPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
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
	c := NewRawConn(dialed, time.Minute)
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

// TestWriteRead: WriteRead is Write then Read, whatever the peer does
// (answers, closes, takes a large write slowly), and a deadline that
// passed fails it before anything is sent.
func TestWriteRead(t *testing.T) {
	t.Parallel()
	t.Run("answer", func(t *testing.T) {
		t.Parallel()
		c, peer := rawPair(t)
		go func() {
			b := make([]byte, 5)
			if _, err := io.ReadFull(peer, b); err == nil {
				peer.Write(bytes.ToUpper(b))
			}
		}()
		b := make([]byte, 64)
		n, err := WriteRead(c, []byte("hello"), b)
		if err != nil || string(b[:n]) != "HELLO" {
			t.Fatalf("got %q, %v; want HELLO", b[:n], err)
		}
	})
	t.Run("peer closes", func(t *testing.T) {
		t.Parallel()
		c, peer := rawPair(t)
		go func() {
			io.ReadFull(peer, make([]byte, 5))
			peer.Close()
		}()
		n, err := WriteRead(c, []byte("hello"), make([]byte, 64))
		if n != 0 || err != io.EOF {
			t.Fatalf("got %d, %v; want 0, EOF", n, err)
		}
	})
	t.Run("write larger than the socket takes", func(t *testing.T) {
		t.Parallel()
		c, peer := rawPair(t)
		p := bytes.Repeat([]byte("x"), 16<<20)
		go func() {
			time.Sleep(50 * time.Millisecond) // the socket buffers fill up first
			if n, err := io.CopyN(io.Discard, peer, int64(len(p))); err == nil {
				peer.Write([]byte(strconv.FormatInt(n, 10)))
			}
		}()
		b := make([]byte, 64)
		n, err := WriteRead(c, p, b)
		if err != nil || string(b[:n]) != strconv.Itoa(len(p)) {
			t.Fatalf("got %q, %v; want %d", b[:n], err, len(p))
		}
	})
	t.Run("deadline passed", func(t *testing.T) {
		t.Parallel()
		c, peer := rawPair(t)
		c.SetDeadline(time.Unix(1, 0))
		_, err := WriteRead(c, []byte("hello"), make([]byte, 64))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("got %v, want a deadline error", err)
		}
		peer.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if n, _ := peer.Read(make([]byte, 8)); n != 0 {
			t.Fatalf("the peer got %d bytes after the deadline passed", n)
		}
	})
	t.Run("deadline while waiting", func(t *testing.T) {
		t.Parallel()
		c, _ := rawPair(t)
		time.AfterFunc(20*time.Millisecond, func() { c.SetDeadline(time.Unix(1, 0)) })
		_, err := WriteRead(c, []byte("hello"), make([]byte, 64))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("got %v, want a deadline error", err)
		}
	})
}

// TestWriteReadSavesRead: on a raw connection WriteRead makes one read
// system call per round trip where Write then Read makes two (the first
// finds nothing yet). Counted from /proc/self/io, which counts read(2)
// and not the peer's recvfrom; not parallel, so that no other test reads.
// The runtime's own reads (its poller's wakeup eventfd) count in both
// phases, so the test asks for half the saving.
func TestWriteReadSavesRead(t *testing.T) {
	if raceBuild || runtime.GOOS != "linux" {
		t.Skip("rawConn uses net's own calls here")
	}
	c, peer := rawPair(t)
	pc := peer.(*net.TCPConn)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		b := make([]byte, 1)
		for {
			// recvfrom, not read(2): the peer's reads are not counted.
			raw, _ := pc.SyscallConn()
			var n int
			var rerr error
			err := raw.Read(func(fd uintptr) bool {
				n, _, rerr = recvfrom(fd, b)
				return rerr != errAgain
			})
			if err != nil || rerr != nil || n == 0 {
				return
			}
			time.Sleep(200 * time.Microsecond) // an app takes a while to answer
			if _, err := pc.Write(b); err != nil {
				return
			}
		}
	}()
	const n = 200
	b := make([]byte, 8)
	plain := readsDuring(t, func() {
		for range n {
			if _, err := c.Write([]byte("a")); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Read(b); err != nil {
				t.Fatal(err)
			}
		}
	})
	fused := readsDuring(t, func() {
		for range n {
			if _, err := WriteRead(c, []byte("a"), b); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Logf("read system calls per round trip: Write+Read %.2f, WriteRead %.2f", float64(plain)/n, float64(fused)/n)
	if plain-fused < n/2 {
		t.Errorf("got %d reads with WriteRead and %d with Write+Read for %d round trips; want at least %d fewer", fused, plain, n, n/2)
	}
}

func readsDuring(t *testing.T, f func()) int {
	before := syscr(t)
	f()
	return syscr(t) - before
}

// syscr is this process's count of read system calls.
func syscr(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no syscr in /proc/self/io")
	return 0
}
