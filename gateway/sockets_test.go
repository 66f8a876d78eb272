package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// pushApp is a sandbox whose WebSocket pushes size bytes to the client
// as fast as it takes them. pushed counts what the gateway accepted.
func pushApp(t *testing.T, size int, pushed *atomic.Int64) *httptest.Server {
	t.Helper()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		msg := make([]byte, 32<<10)
		for sent := 0; sent < size; sent += len(msg) {
			if err := c.Write(r.Context(), websocket.MessageBinary, msg); err != nil {
				return
			}
			pushed.Add(int64(len(msg)))
		}
		c.Read(r.Context()) // until the gateway closes the socket
	}))
	t.Cleanup(app.Close)
	return app
}

// dialStalledSocket opens a WebSocket through the gateway at addr and
// never reads past the 101 head. Its receive buffer is small, so the
// gateway's writes to it block soon.
func dialStalledSocket(t *testing.T, addr, host, token string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return nil
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", host, token)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, 16) // reads little beyond the head
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, " 101 ") {
		t.Fatalf("got %q (%v), want 101", line, err)
	}
	return c
}

// waitStalled waits until the app's pushes stop moving: the gateway's
// pump is then blocked writing to the client that does not read.
func waitStalled(t *testing.T, pushed *atomic.Int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last, since := pushed.Load(), time.Now()
	for time.Since(since) < 300*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("the app kept pushing (%d bytes): the client's socket never filled", pushed.Load())
		}
		time.Sleep(20 * time.Millisecond)
		if n := pushed.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	if last == 0 {
		t.Fatal("the app pushed nothing")
	}
}

// TestStalledSocketClient: a WebSocket client that never reads while its
// sandbox pushes 10 MB does not wedge closing its sockets (the reaper's
// BeforeStop), Server.Shutdown/Close or Gateway.Close (#13, item 5). The
// bound is generous: a hang fails, slowness does not.
func TestStalledSocketClient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		close func(g *Gateway, s *Server)
	}{
		{"CloseSockets", func(g *Gateway, s *Server) {
			if n := g.CloseSockets("abc"); n != 1 {
				t.Errorf("CloseSockets closed %d sockets, want 1", n)
			}
		}},
		{"Shutdown", func(g *Gateway, s *Server) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			s.Shutdown(ctx)
			g.Close()
		}},
		{"Close", func(g *Gateway, s *Server) {
			s.Close()
			g.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			var pushed atomic.Int64
			app := pushApp(t, 10<<20, &pushed)
			sb := &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}
			g, err := New(cfg, fakes(sb), Options{}, testkit.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			s := NewServer(cfg, g, testkit.Logger(t))
			srv := serve(t, s)
			dialStalledSocket(t, srv.Listener.Addr().String(), "sandbox-abc."+testDomain, testkit.Mint(t, cfg, "abc", time.Hour))
			waitStalled(t, &pushed)

			testkit.Within(t, 10*time.Second, tc.name, func() { tc.close(g, s) })
			// The socket pair is gone, not just marked: its sandbox hold
			// was released.
			testkit.Within(t, 10*time.Second, "the socket's end", func() {
				for sb.held.Load() != 0 {
					time.Sleep(10 * time.Millisecond)
				}
			})
		})
	}
}
