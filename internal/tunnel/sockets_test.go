package tunnel

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// hijackable is a ResponseWriter whose Hijack hands out one end of a pipe.
type hijackable struct {
	*httptest.ResponseRecorder
	conn net.Conn
}

func (h *hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return h.conn, bufio.NewReadWriter(bufio.NewReader(h.conn), bufio.NewWriter(h.conn)), nil
}

// hijacked registers one end of a pipe under key and returns it with the
// other end (the client) and a channel closed when cancel ran.
func hijacked(t *testing.T, s *Registry, key string) (net.Conn, net.Conn, <-chan struct{}) {
	t.Helper()
	server, client := net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	cancelled := make(chan struct{})
	w := s.Wrap(&hijackable{ResponseRecorder: httptest.NewRecorder(), conn: server}, key, func() { close(cancelled) })
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Done)
	return c, client, cancelled
}

// TestCloseAllCutsAStuckWrite: a client that stops reading does not hold
// CloseAll (promise 4): the write in progress fails at once, the socket's
// proxying is cancelled, and no close frame is owed.
func TestCloseAllCutsAStuckWrite(t *testing.T) {
	s := NewRegistry()
	c, _, cancelled := hijacked(t, s, "a")
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 1<<20)) // nobody reads the pipe
		werr <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); c.(*socketConn).state.Load() != sockWriting; {
		if time.Now().After(deadline) {
			t.Fatal("the write never started")
		}
		time.Sleep(time.Millisecond)
	}
	if n := s.CloseAll("a"); n != 1 {
		t.Fatalf("CloseAll: got %d sockets, want 1", n)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("CloseAll did not cancel the socket's proxying")
	}
	select {
	case err := <-werr:
		if err == nil {
			t.Fatal("the cut write succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write in progress was not cut")
	}
	if st := c.(*socketConn).state.Load(); st != sockCut {
		t.Errorf("state: got %d, want sockCut (%d)", st, sockCut)
	}
}

// TestCloseAllBetweenWrites: a socket closed while no write is in
// progress gets the 1001 close frame when its splice ends (sendGoAway),
// and nothing written after CloseAll reaches the client.
func TestCloseAllBetweenWrites(t *testing.T) {
	s := NewRegistry()
	c, client, _ := hijacked(t, s, "b")
	other, _, _ := hijacked(t, s, "other")
	if n := s.CloseAll("b"); n != 1 {
		t.Fatalf("CloseAll(b): got %d sockets, want 1", n)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, errGoingAway) {
		t.Errorf("write after CloseAll: got %v, want errGoingAway", err)
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(closeFrame1001))
		io.ReadFull(client, b)
		got <- b
	}()
	c.(*socketConn).sendGoAway()
	select {
	case b := <-got:
		if !bytes.Equal(b, closeFrame1001) {
			t.Errorf("client read %x, want the 1001 close frame %x", b, closeFrame1001)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no close frame reached the client")
	}
	if st := other.(*socketConn).state.Load(); st != sockOpen {
		t.Errorf("another key's socket: state %d, want open", st)
	}
	if n := s.Count(); n != 2 {
		t.Errorf("Count: got %d, want 2 (CloseAll does not unregister; Done does)", n)
	}
}
