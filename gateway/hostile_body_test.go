package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// The tests in hostile_test.go attack bodiless requests; these attack
// requests with bodies, which take the same path (upstream.Pool.Exchange)
// with their body streamed beside the answer.

// send sends method to sandbox id through srv, a POST with a body,
// anything else without, and returns the status and body of the answer.
func send(t *testing.T, srv *httptest.Server, cfg *config.Config, method, id, path string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("payload")
	}
	req, _ := http.NewRequest(method, srv.URL+path, body)
	req.Host = "sandbox-" + id + "." + testDomain
	req.Header.Set("Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, id, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "read error: " + err.Error()
	}
	return resp.StatusCode, string(b)
}

// post is send of a POST with a body.
func post(t *testing.T, srv *httptest.Server, cfg *config.Config, id, path string) (int, string) {
	t.Helper()
	return send(t, srv, cfg, "POST", id, path)
}

// TestHostileBodySwitchClosed: a 101 to a POST that asked for no upgrade
// is a 502, and the gateway closes that upstream connection at once
// instead of leaving it to the garbage collector (a sandbox answering
// every POST so would pile up the gateway's descriptors).
func TestHostileBodySwitchClosed(t *testing.T) {
	t.Parallel()
	closed := make(chan error, 4)
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/switch" {
			io.WriteString(w, okResponse("ok "+r.URL.Path))
			return true
		}
		io.WriteString(w, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		c := w.(net.Conn)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		closed <- err
		return false
	})
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	onBothLoops(t, eps, nil, func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
		if code, body := post(t, srv, cfg, "abc", "/switch"); code != http.StatusBadGateway {
			t.Fatalf("got %d %q, want 502", code, body)
		}
		if err := <-closed; !errors.Is(err, io.EOF) {
			t.Fatalf("the sandbox's connection after the refused 101: read gave %v, want EOF (closed by the gateway)", err)
		}
		if code, body := post(t, srv, cfg, "abc", "/next"); code != 200 || body != "ok /next" {
			t.Fatalf("next request: got %d %q, want 200 %q", code, body, "ok /next")
		}
	})
}

// TestHostileBodyInstanceGone: once an instance is reported gone, the
// connections pooled for it after requests with bodies are closed, and the instance
// that replaces it on the same address gets a new one.
func TestHostileBodyInstanceGone(t *testing.T) {
	t.Parallel()
	gone := make(chan error, 1)
	addr, _ := rawApp(t, func(w io.Writer, conn, _ int, r *http.Request) bool {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, okResponse(fmt.Sprintf("conn %d", conn)))
		if conn != 1 {
			return true
		}
		// The first connection waits for its next request or its close.
		c := w.(net.Conn)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := c.Read(make([]byte, 1))
		gone <- err
		return false
	})
	eps := &endpoints{}
	eps.set("abc", addr, "c1@1")
	cfg := testConfig()
	g, srv := startGateway(t, cfg, eps)
	if code, body := post(t, srv, cfg, "abc", "/"); code != 200 || body != "conn 1" {
		t.Fatalf("got %d %q, want 200 from the first connection", code, body)
	}
	g.InstanceGone("c1@1")
	if err := <-gone; !errors.Is(err, io.EOF) {
		t.Fatalf("the gone instance's pooled connection: read gave %v, want EOF (closed by the gateway)", err)
	}
	eps.set("abc", addr, "c1@2")
	if code, body := post(t, srv, cfg, "abc", "/"); code != 200 || body != "conn 2" {
		t.Fatalf("after the instance went: got %d %q, want 200 from a new connection", code, body)
	}
}

// TestHostileBodyExtraResponse: an app answers each POST with its
// response plus a planted second one. Every client gets exactly the
// answer to its own request; the planted one never reaches anybody (the
// connection that held it is not reused).
func TestHostileBodyExtraResponse(t *testing.T) {
	t.Parallel()
	addr, conns := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, okResponse("ok "+r.URL.Path)+okResponse("planted"))
		return true
	})
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	onBothLoops(t, eps, nil, func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
		before := conns.Load()
		for _, path := range []string{"/a", "/b", "/c"} {
			if code, body := post(t, srv, cfg, "abc", path); code != 200 || body != "ok "+path {
				t.Fatalf("%s: got %d %q, want 200 %q", path, code, body, "ok "+path)
			}
		}
		if n := conns.Load() - before; n != 3 {
			t.Errorf("%d app connections for 3 POSTs each answered twice, want 3 (none reused)", n)
		}
	})
}

// TestHostileBodyAnswerFirst: an app answers a POST before it read the
// body, and never reads it. The client gets that answer at once, and the
// next request a connection of its own (the body did not go out whole).
func TestHostileBodyAnswerFirst(t *testing.T) {
	t.Parallel()
	addr, conns := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		io.WriteString(w, okResponse("early "+r.URL.Path))
		if r.Method == http.MethodPost {
			<-t.Context().Done() // the body is never read
			return false
		}
		return true
	})
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	onBothLoops(t, eps, nil, func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
		before := conns.Load()
		big := strings.Repeat("x", 8<<20) // beyond the socket buffers: the app's refusal to read shows
		req, _ := http.NewRequest("POST", srv.URL+"/upload", strings.NewReader(big))
		req.Host = "sandbox-abc." + testDomain
		req.Header.Set("Authorization", "Bearer "+testkit.Mint(t, cfg, "abc", time.Minute))
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "early /upload" {
			t.Fatalf("POST: got %d %q, want 200 %q", resp.StatusCode, b, "early /upload")
		}
		if code, body := send(t, srv, cfg, "GET", "abc", "/next"); code != 200 || body != "early /next" {
			t.Fatalf("next request: got %d %q, want 200 %q", code, body, "early /next")
		}
		if n := conns.Load() - before; n != 2 {
			t.Errorf("%d app connections, want 2: the one whose body the app never read is not reused", n)
		}
	})
}
