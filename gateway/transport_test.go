package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newTestLean(t *testing.T) *leanTransport {
	t.Helper()
	d := &net.Dialer{Timeout: time.Second}
	lt := newLeanTransport(&http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}, d)
	t.Cleanup(lt.CloseIdleConnections)
	return lt
}

func leanGet(t *testing.T, lt *leanTransport, method, url string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := lt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(body)
}

// TestLeanTransportFraming: bodies with a length, chunked, none (HEAD, 204,
// 304) and until-close all arrive whole, and kept-alive connections are
// reused only when the response allows it.
func TestLeanTransportFraming(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	app := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/len":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		case "/chunked":
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		case "/early-hints":
			w.Header().Set("Link", "</app.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			io.WriteString(w, "after hints")
		}
	}))
	app.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	app.Start()
	defer app.Close()
	lt := newTestLean(t)
	for _, tc := range []struct {
		method, path, want string
		status             int
	}{
		{"GET", "/len", "hello", 200},
		{"GET", "/chunked", "ab", 200},
		{"HEAD", "/len", "", 200},
		{"GET", "/204", "", 204},
		{"GET", "/304", "", 304},
		{"GET", "/early-hints", "after hints", 200},
		{"GET", "/len", "hello", 200},
	} {
		resp, body := leanGet(t, lt, tc.method, app.URL+tc.path)
		if resp.StatusCode != tc.status || body != tc.want {
			t.Fatalf("%s %s: got %d %q, want %d %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("got %d connections for 7 kept-alive exchanges, want 1", n)
	}
	if _, body := leanGet(t, lt, "GET", app.URL+"/close"); body != "bye" {
		t.Fatalf("got %q", body)
	}
	leanGet(t, lt, "GET", app.URL+"/len")
	if n := conns.Load(); n != 2 {
		t.Fatalf("got %d connections, want a new one after Connection: close", n)
	}
}

// TestLeanTransportStaleConn: a pooled connection the app closed meanwhile
// is replaced transparently.
func TestLeanTransportStaleConn(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Each connection answers one request, keeps the connection "alive"
	// in its headers, then closes it: the next request finds it dead.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				http.ReadRequest(bufio.NewReader(c))
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}()
		}
	}()
	lt := newTestLean(t)
	for i := range 3 {
		if _, body := leanGet(t, lt, "GET", "http://"+ln.Addr().String()+"/"); body != "ok" {
			t.Fatalf("request %d: got %q", i, body)
		}
		time.Sleep(20 * time.Millisecond) // let the server's close land
	}
}

// TestLeanTransportCancel: a request whose client goes away stops waiting
// for a slow app at once.
func TestLeanTransportCancel(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer app.Close()
	defer close(release)
	lt := newTestLean(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", app.URL+"/", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := lt.RoundTrip(req)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "canceled") {
			t.Fatalf("got %v, want context canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip still waiting after its context was cancelled")
	}
}

// TestLeanTransportFallback: requests with bodies go to the standard
// transport, bodies intact.
func TestLeanTransportFallback(t *testing.T) {
	t.Parallel()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %d", r.Method, len(b))
	}))
	defer app.Close()
	lt := newTestLean(t)
	req, _ := http.NewRequest("POST", app.URL+"/", strings.NewReader(strings.Repeat("x", 100000)))
	resp, err := lt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "POST 100000" {
		t.Fatalf("got %q", body)
	}
}
