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

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// directGet sends method path for sandbox abc through a gateway whose
// sandbox lives at addr, over the direct path and its connection pool.
func directGet(t *testing.T, srv *httptest.Server, tok, method, path string) (*http.Response, string) {
	t.Helper()
	resp := testkit.Request(t, srv, method, "sandbox-abc."+testDomain, path, tok)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, string(body)
}

// TestDirectFraming: bodies with a length, chunked, none (HEAD, 204, 304),
// after a 103, and until-close all arrive whole, and the pooled
// connection is reused only when the response allows it.
func TestDirectFraming(t *testing.T) {
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
	cfg := testConfig()
	_, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}})
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
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
		resp, body := directGet(t, srv, tok, tc.method, tc.path)
		if resp.StatusCode != tc.status || body != tc.want {
			t.Fatalf("%s %s: got %d %q, want %d %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("got %d app connections for 7 sequential requests, want 1", n)
	}
	if _, body := directGet(t, srv, tok, "GET", "/close"); body != "bye" {
		t.Fatalf("got %q", body)
	}
	directGet(t, srv, tok, "GET", "/len")
	if n := conns.Load(); n != 2 {
		t.Fatalf("got %d app connections, want a new one after Connection: close", n)
	}
}

// TestDirectStaleConn: a pooled connection the app closed meanwhile is
// replaced transparently.
func TestDirectStaleConn(t *testing.T) {
	t.Parallel()
	// Each connection answers one request without saying it will close,
	// then closes: the next request finds the pooled connection dead.
	addr := testkit.ServeTCP(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	cfg := testConfig()
	_, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{addr}})
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	for i := range 3 {
		if resp, body := directGet(t, srv, tok, "GET", "/"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d: got %d %q", i, resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond) // let the app's close land
	}
}

// TestDirectCancel: when the client goes away, the handler stops waiting
// for a slow app at once.
func TestDirectCancel(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer app.Close()
	defer close(release)
	cfg := testConfig()
	g, err := New(cfg, fakes(&fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, "GET", "http://sandbox-abc."+testDomain+"/", nil)
	req.Header.Set("Authorization", "Bearer "+testkit.Mint(t, cfg, "abc", time.Minute))
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.ServeHTTP(httptest.NewRecorder(), req)
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("handler still waiting for the app after its client went away")
	}
}

// TestProxyBodiesAndMethods: requests the direct path does not take (a
// body, a non-idempotent method) go through ReverseProxy intact.
func TestProxyBodiesAndMethods(t *testing.T) {
	t.Parallel()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %d", r.Method, len(b))
	}))
	defer app.Close()
	cfg := testConfig()
	_, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}})
	req := abcRequest("POST", srv.URL+"/", strings.NewReader(strings.Repeat("x", 100000)), testkit.Mint(t, cfg, "abc", time.Minute))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "POST 100000" {
		t.Fatalf("got %q", body)
	}
}
