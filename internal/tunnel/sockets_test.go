package tunnel

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/upstream"
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

// TestGoAwayWithReason: one socket closed by its Writer gets a close
// frame with that code and reason (a later CloseAll does not change it);
// before the hijack, GoAway cancels the proxying only.
func TestGoAwayWithReason(t *testing.T) {
	s := NewRegistry()
	server, client := net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	cancelled := make(chan struct{})
	var once sync.Once
	w := s.Wrap(&hijackable{ResponseRecorder: httptest.NewRecorder(), conn: server}, "k", func() { once.Do(func() { close(cancelled) }) })
	c, _, err := w.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Done()
	w.GoAway(1008, "share link revoked")
	s.CloseAll("")
	<-cancelled
	want := CloseFrame(1008, "share link revoked")
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(want))
		io.ReadFull(client, b)
		got <- b
	}()
	c.(*socketConn).sendGoAway()
	select {
	case b := <-got:
		if !bytes.Equal(b, want) || want[1] != 2+18 || want[2] != 0x03 || want[3] != 0xf0 {
			t.Errorf("client read %x, want the 1008 close frame %x", b, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no close frame reached the client")
	}
	if n := len(CloseFrame(1008, strings.Repeat("x", 200))); n != 4+123 {
		t.Errorf("a long reason: frame of %d bytes, want %d (a control frame's payload is at most 125)", n, 4+123)
	}

	early := make(chan struct{})
	w2 := s.Wrap(httptest.NewRecorder(), "k", func() { close(early) })
	w2.GoAway(1008, "before the switch")
	select {
	case <-early:
	case <-time.After(10 * time.Second):
		t.Fatal("GoAway before the hijack did not cancel the proxying")
	}
}

// earlyHijackable hands out a connection whose reader already holds
// bytes the client sent past its request.
type earlyHijackable struct {
	*httptest.ResponseRecorder
	conn  net.Conn
	early string
}

func (h *earlyHijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	br := bufio.NewReader(io.MultiReader(strings.NewReader(h.early), h.conn))
	br.Peek(len(h.early))
	return h.conn, bufio.NewReadWriter(br, bufio.NewWriter(h.conn)), nil
}

// TestTake: the client gets the sandbox's 101 with the gateway's own
// headers added, then the bytes the sandbox sent early; the sandbox gets
// the bytes the client sent early; the connection is registered. A
// ResponseWriter that cannot be hijacked fails with w still able to answer.
func TestTake(t *testing.T) {
	s := NewRegistry()
	server, client := net.Pipe()
	back, app := net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close(); back.Close(); app.Close() })
	const answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nfrom app"
	backBuf := bufio.NewReader(strings.NewReader(answer))
	res, err := upstream.ReadFinal(backBuf, http.MethodGet, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := s.Wrap(&earlyHijackable{ResponseRecorder: httptest.NewRecorder(), conn: server, early: "from client"}, "k", func() {})
	w.Header().Set("X-Request-Id", "id1")
	type read struct {
		head *http.Response
		rest string
		err  error
	}
	atClient, atApp := make(chan read, 1), make(chan string, 1)
	go func() {
		br := bufio.NewReader(client)
		head, err := http.ReadResponse(br, nil)
		rest := make([]byte, len("from app"))
		if err == nil {
			_, err = io.ReadFull(br, rest)
		}
		atClient <- read{head, string(rest), err}
	}()
	go func() {
		b := make([]byte, len("from client"))
		io.ReadFull(app, b)
		atApp <- string(b)
	}()
	c, err := w.Take(back, backBuf, res, &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	defer w.Done()
	got := <-atClient
	if got.err != nil || got.head.StatusCode != 101 || got.head.Header.Get("Upgrade") != "websocket" ||
		got.head.Header.Get("X-Request-Id") != "id1" || got.rest != "from app" {
		t.Errorf("client got %v %v, %q (%v), want the 101 with X-Request-Id, then \"from app\"", got.head.Status, got.head.Header, got.rest, got.err)
	}
	if b := <-atApp; b != "from client" {
		t.Errorf("app got %q, want \"from client\"", b)
	}
	if _, ok := c.(*socketConn); !ok || !w.Hijacked() || s.Count() != 1 || w.ResponseWriter != nil {
		t.Errorf("got %T, hijacked %v, %d registered, writer kept %v: want the registered socket, the server's writer let go",
			c, w.Hijacked(), s.Count(), w.ResponseWriter != nil)
	}

	res, err = upstream.ReadFinal(bufio.NewReader(strings.NewReader(answer)), http.MethodGet, nil)
	if err != nil {
		t.Fatal(err)
	}
	w = s.Wrap(httptest.NewRecorder(), "k", func() {})
	if c, err := w.Take(back, nil, res, &http.Request{Method: http.MethodGet}); err == nil || c != nil || w.Hijacked() {
		t.Errorf("Take on a writer that cannot hijack: got %v, %v, hijacked %v", c, err, w.Hijacked())
	}
}
