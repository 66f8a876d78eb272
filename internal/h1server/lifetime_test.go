package h1server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestServerShutdown: idle lean connections close at once; a request in
// flight finishes (with Connection: close) before Shutdown returns.
func TestServerShutdown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "done")
	})
	s := NewServer(testConfig(), leanAll{h}, testkit.Logger(t))
	addr := serve(t, s).Listener.Addr().String()
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	idleBR := bufio.NewReader(idle)
	if resp, err := http.ReadResponse(idleBR, nil); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := idleBR.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection: read %d, %v; want EOF at shutdown", n, err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" || !resp.Close {
		t.Errorf("in-flight request: got %q close=%v, want \"done\" with Connection: close", b, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("listener still accepting after Shutdown")
	}
}

// TestLeanIdleTimeout: a keep-alive connection that stays quiet is closed
// after limits.idle_conn_timeout.
func TestLeanIdleTimeout(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Limits.IdleConnTimeout = config.Duration(200 * time.Millisecond)
	s := NewServer(cfg, leanAll{responses()}, testkit.Logger(t))
	c, err := net.Dial("tcp", serve(t, s).Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for range 3 { // each request moves the deadline on
		io.WriteString(c, "GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		time.Sleep(50 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read %d, %v; want EOF once idle", n, err)
	}
}

// TestLeanClientLeaves: a lean request that runs long notices its client
// closing the connection, as net/http's requests do: its context ends.
// Over TLS the client's close sends a close_notify record before the FIN.
func TestLeanClientLeaves(t *testing.T) {
	t.Parallel()
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			t.Parallel()
			cancelled := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
					close(cancelled)
				case <-time.After(time.Minute):
				}
			})
			s := NewServer(testConfig(), leanAll{h}, testkit.Logger(t))
			if useTLS {
				s.TLSConfig = testkit.TLSConfig()
			}
			addr := serve(t, s).Listener.Addr().String()
			var c net.Conn
			var err error
			if useTLS {
				c, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
			} else {
				c, err = net.Dial("tcp", addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
			time.Sleep(100 * time.Millisecond)
			c.Close()
			select {
			case <-cancelled:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler's context did not end after its client left")
			}
			if s.leanN.Load() != 1 {
				t.Fatal("the request did not take the lean loop")
			}
		})
	}
}

// TestLeanSlowRequestKeepsConnection: watching a slow request's client
// does not disturb the connection: a request pipelined meanwhile (read by
// the watcher) is served next, in order.
func TestLeanSlowRequestKeepsConnection(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(3 * watchAfter)
		}
		io.WriteString(w, r.URL.Path)
	})
	s := NewServer(testConfig(), leanAll{h}, testkit.Logger(t))
	c, err := net.Dial("tcp", serve(t, s).Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(2 * watchAfter) // the watcher runs by now
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	for _, path := range []string{"/slow", "/next"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != path {
			t.Fatalf("got %q, want %q", b, path)
		}
	}
	if n := s.leanN.Load(); n != 2 {
		t.Fatalf("lean loop served %d requests, want 2", n)
	}
}
