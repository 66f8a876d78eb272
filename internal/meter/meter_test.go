package meter

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFinal: the status a request is recorded with.
func TestFinal(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name  string
		serve func(w *Writer)
		ctx   context.Context
		want  int
	}{
		{"header", func(w *Writer) { w.WriteHeader(http.StatusTeapot); w.WriteHeader(http.StatusOK) }, context.Background(), http.StatusTeapot},
		{"body only", func(w *Writer) { io.WriteString(w, "x") }, context.Background(), http.StatusOK},
		{"interim, then final", func(w *Writer) { w.WriteHeader(http.StatusEarlyHints); w.WriteHeader(http.StatusBadGateway) }, context.Background(), http.StatusBadGateway},
		{"interim, then body", func(w *Writer) { w.WriteHeader(http.StatusEarlyHints); io.WriteString(w, "x") }, context.Background(), http.StatusOK},
		{"flush only", func(w *Writer) { w.Flush() }, context.Background(), http.StatusOK},
		{"nothing", func(*Writer) {}, context.Background(), http.StatusOK},
		{"nothing, client gone", func(*Writer) {}, gone, StatusClientClosed},
		{"answered, client gone", func(w *Writer) { w.WriteHeader(http.StatusBadGateway) }, gone, http.StatusBadGateway},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(c.ctx)
		var w Writer
		w.Start(httptest.NewRecorder(), r)
		c.serve(&w)
		if got := w.Final(r); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestCounts: the body bytes each way, read and written through the
// Writer; a bodiless request's body is left alone.
func TestCounts(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("hello, world"))
	rec := httptest.NewRecorder()
	var w Writer
	w.Start(rec, r)
	buf := make([]byte, 5)
	r.Body.Read(buf)
	io.Copy(io.Discard, r.Body)
	io.WriteString(&w, "abc")
	w.Write([]byte("defg"))
	if w.BodyRead() != 12 || w.Written() != 7 || rec.Body.String() != "abcdefg" {
		t.Errorf("read %d, written %d (%q); want 12, 7", w.BodyRead(), w.Written(), rec.Body.String())
	}
	r = httptest.NewRequest(http.MethodGet, "/", nil)
	w = Writer{}
	w.Start(rec, r)
	if r.Body != http.NoBody || w.BodyRead() != 0 {
		t.Errorf("bodiless request: body %T, read %d", r.Body, w.BodyRead())
	}
}

// TestHijack: an upgrade through http.ResponseController reaches the
// connection and is recorded as 101; the Writer still streams as an
// http.Flusher.
func TestHijack(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var w Writer
		w.Start(rw, r)
		if _, ok := any(&w).(http.Flusher); !ok {
			t.Error("not an http.Flusher")
		}
		c, brw, err := http.NewResponseController(&w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n\r\n")
		brw.Flush()
		c.Close()
		if !w.Hijacked() || w.Final(r) != http.StatusSwitchingProtocols {
			t.Errorf("hijacked %v, final %d", w.Hijacked(), w.Final(r))
		}
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 101") {
		t.Errorf("answer %q, %v", line, err)
	}
}
