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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// Upstreams that break the connPool invariants (transport.go) on purpose,
// in-process; hostile_docker_test.go runs the same attacks from a real
// container.

// rawApp is an upstream that speaks HTTP/1.1 by hand: answer is called for
// every request read, with the connection's number (from 1) and the
// request's number on that connection (from 1), and writes whatever it
// likes. It returns false to close the connection.
func rawApp(t testing.TB, answer func(w io.Writer, conn, nth int, r *http.Request) bool) (addr string, conns *atomic.Int32) {
	t.Helper()
	conns = new(atomic.Int32)
	addr = testkit.ServeTCP(t, func(c net.Conn) {
		n := int(conns.Add(1))
		br := bufio.NewReader(c)
		for nth := 1; ; nth++ {
			r, err := http.ReadRequest(br)
			if err != nil || !answer(c, n, nth, r) {
				return
			}
		}
	})
	return addr, conns
}

// endpoints is a Sandboxes fake whose endpoints carry instances: each
// sandbox id maps to its current endpoint, which a test can replace.
type endpoints struct {
	fakeSandboxes
	mu  sync.Mutex // guards eps
	eps map[string]sandboxmgr.Endpoint
}

func (e *endpoints) set(id, addr, instance string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.eps == nil {
		e.eps = make(map[string]sandboxmgr.Endpoint)
	}
	e.eps[id] = sandboxmgr.Endpoint{ID: id, Addr: addr, Instance: instance, Template: "app"}
}

func (e *endpoints) Ensure(ctx context.Context, id string, tpl *config.Template) (sandboxmgr.Endpoint, error) {
	e.ensures.Add(1)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.eps[id], nil
}

func (e *endpoints) EnsureWith(ctx context.Context, id string, tpl *config.Template, _ sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	return e.Ensure(ctx, id, tpl)
}

func (e *endpoints) Known(id string) (string, bool) {
	ep, ok := e.Cached(id)
	return ep.Template, ok
}

func (e *endpoints) Cached(id string) (sandboxmgr.Endpoint, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep, ok := e.eps[id]
	return ep, ok
}

// gatewayTo runs the gateway in front of one sandbox, abc, whose app
// (instance i1) listens at addr, and returns its server and a token for
// abc.
func gatewayTo(t *testing.T, addr string) (*httptest.Server, string) {
	t.Helper()
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	cfg := testConfig()
	_, srv := startGateway(t, cfg, eps)
	return srv, testkit.Mint(t, cfg, "abc", time.Minute)
}

// hostileGateway runs the gateway in front of eps, on the lean loop and on
// net/http (lean off) alike; each subtest gets both.
func hostileGateway(t *testing.T, eps *endpoints, run func(t *testing.T, get func(id, path string, hdr ...string) (int, string))) {
	onBothLoops(t, eps, nil, func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 10 * time.Second}
		t.Cleanup(client.CloseIdleConnections)
		run(t, func(id, path string, hdr ...string) (int, string) {
			t.Helper()
			req, _ := http.NewRequest("GET", srv.URL+path, nil)
			req.Host = "sandbox-" + id + "." + testDomain
			req.Header.Set("Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute))
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET %s%s: %v", id, path, err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				return resp.StatusCode, "read error: " + err.Error()
			}
			return resp.StatusCode, string(b)
		})
	})
}

func okResponse(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// TestHostileExtraResponse: an app answers each request with its response
// plus a second, planted one (at once or a moment later). Every client
// gets exactly the answer to its own request; the planted one never
// reaches anybody.
func TestHostileExtraResponse(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(fmt.Sprintf("delay=%v", delay), func(t *testing.T) {
			t.Parallel()
			const planted = "HTTP/1.1 200 OK\r\nSet-Cookie: planted=1\r\nContent-Length: 7\r\n\r\nplanted"
			addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
				if delay == 0 { // one write: both arrive together
					io.WriteString(w, okResponse("for "+r.URL.Path)+planted)
					return true
				}
				io.WriteString(w, okResponse("for "+r.URL.Path))
				time.Sleep(delay)
				io.WriteString(w, planted)
				return true
			})
			eps := &endpoints{}
			eps.set("abc", addr, "inst-1")
			hostileGateway(t, eps, func(t *testing.T, get func(string, string, ...string) (int, string)) {
				for i := range 6 {
					path := fmt.Sprintf("/user-%d", i)
					if code, body := get("abc", path); code != 200 || body != "for "+path {
						t.Fatalf("request %d: got %d %q, want 200 %q", i, code, body, "for "+path)
					}
					if delay > 0 {
						// Let the late planted response land before the next
						// request (see internal/upstream's doc for one that
						// lands after the check).
						time.Sleep(500 * time.Millisecond)
					}
				}
			})
		})
	}
}

// TestHostileAddressReuse: sandbox A's app answers the second request on
// any connection with a planted response. Sandbox B's container inherits
// A's address (same addr, another instance): B's request must go on a
// connection of its own, never on one of A's.
func TestHostileAddressReuse(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"GET", "POST"} { // the direct path, ReverseProxy
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			addr, conns := rawApp(t, func(w io.Writer, _, nth int, r *http.Request) bool {
				io.Copy(io.Discard, r.Body)
				if nth > 1 {
					io.WriteString(w, "HTTP/1.1 200 OK\r\nSet-Cookie: planted=1\r\nContent-Length: 7\r\n\r\nplanted")
					return true
				}
				io.WriteString(w, okResponse("fresh "+r.Header.Get("X-Forwarded-Host")))
				return true
			})
			eps := &endpoints{}
			eps.set("aaa", addr, "container-a@1")
			eps.set("bbb", addr, "container-b@1")
			onBothLoops(t, eps, nil, func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
				before := conns.Load()
				if code, body := send(t, srv, cfg, method, "aaa", "/"); code != 200 || !strings.HasPrefix(body, "fresh sandbox-aaa") {
					t.Fatalf("A: got %d %q", code, body)
				}
				if code, body := send(t, srv, cfg, method, "bbb", "/"); code != 200 || !strings.HasPrefix(body, "fresh sandbox-bbb") {
					t.Fatalf("B got %d %q, want its own fresh answer (a connection of A's reused)", code, body)
				}
				if got := conns.Load() - before; got != 2 {
					t.Fatalf("got %d upstream connections for two instances, want 2", got)
				}
			})
		})
	}
}

// TestHostileInstanceGone: once the manager reports an instance gone, its
// pooled connections are closed and never used again.
func TestHostileInstanceGone(t *testing.T) {
	t.Parallel()
	addr, conns := rawApp(t, func(w io.Writer, conn, _ int, r *http.Request) bool {
		io.WriteString(w, okResponse(fmt.Sprintf("conn %d", conn)))
		return true
	})
	eps := &endpoints{}
	eps.set("abc", addr, "c1@1")
	cfg := testConfig()
	g, srv := startGateway(t, cfg, eps)
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	get := func() string {
		_, body := directGet(t, srv, tok, "GET", "/")
		return body
	}
	first := get()
	if again := get(); again != first {
		t.Fatalf("got %q then %q: a live instance's connection was not reused", first, again)
	}
	g.InstanceGone("c1@1")
	eps.set("abc", addr, "c1@2") // the same container started again
	after := get()
	if after == first {
		t.Fatalf("got %q after the instance went away: its connection was reused", after)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("got %d upstream connections, want 2", n)
	}
	// A paused and unpaused container keeps its instance: after the
	// report its connections are new ones, and they are pooled again.
	g.InstanceGone("c1@2")
	third := get()
	if third == after {
		t.Fatalf("got %q after the instance was reported again: its connection was reused", third)
	}
	if again := get(); again != third {
		t.Fatalf("got %q then %q: a connection dialed after the report was not pooled", third, again)
	}
}

// TestHostileSwitchWithoutUpgrade: a 101 to a request that asked for no
// upgrade is a 502, and its connection is never used again.
func TestHostileSwitchWithoutUpgrade(t *testing.T) {
	t.Parallel()
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		if r.URL.Path == "/switch" {
			io.WriteString(w, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nplanted")
			return true
		}
		io.WriteString(w, okResponse("ok "+r.URL.Path))
		return true
	})
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	hostileGateway(t, eps, func(t *testing.T, get func(string, string, ...string) (int, string)) {
		if code, body := get("abc", "/switch"); code != http.StatusBadGateway {
			t.Fatalf("got %d %q, want 502", code, body)
		}
		if code, body := get("abc", "/next"); code != 200 || body != "ok /next" {
			t.Fatalf("next request: got %d %q, want 200 %q", code, body, "ok /next")
		}
	})
}

// TestHostileRetry: a request that fails on a reused connection before any
// response byte is sent again once on a fresh connection; one that got
// part of a response is not (the app sees it exactly once).
func TestHostileRetry(t *testing.T) {
	t.Parallel()
	var partial atomic.Int32
	addr, _ := rawApp(t, func(w io.Writer, _, nth int, r *http.Request) bool {
		switch {
		case r.URL.Path == "/partial" && nth > 1:
			partial.Add(1)
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Le")
			return false
		case nth > 1:
			return false // read the request, then die without a byte
		}
		io.WriteString(w, okResponse("ok "+r.URL.Path))
		return true
	})
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	hostileGateway(t, eps, func(t *testing.T, get func(string, string, ...string) (int, string)) {
		get("abc", "/warm")
		if code, body := get("abc", "/again"); code != 200 || body != "ok /again" {
			t.Fatalf("got %d %q, want the request retried on a fresh connection", code, body)
		}
		before := partial.Load()
		if code, _ := get("abc", "/partial"); code != http.StatusBadGateway {
			t.Fatalf("partial answer: got %d, want 502", code)
		}
		if n := partial.Load() - before; n != 1 {
			t.Fatalf("the app saw the half-answered request %d times, want 1", n)
		}
	})
}

// TestRequestIDSurvivesConnection: a client's Connection header cannot
// strip the gateway's own X-Request-Id from the request the app gets.
func TestRequestIDSurvivesConnection(t *testing.T) {
	t.Parallel()
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
		}
		io.WriteString(w, okResponse("id="+r.Header.Get("X-Request-Id")))
		return true
	})
	srv, tok := gatewayTo(t, addr)
	for _, method := range []string{"GET", "POST"} {
		req := abcRequest(method, srv.URL+"/", strings.NewReader(""), tok)
		req.Header.Set("Connection", "X-Request-Id")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "id=" + resp.Header.Get("X-Request-Id"); string(b) != want || want == "id=" {
			t.Fatalf("%s: app got %q, want %q", method, b, want)
		}
	}
}
