package gateway

// The bounds a sandbox or a client meets on the paths other than the
// direct one (#13's review): response heads on the upgrade handshake and
// ReverseProxy, interim answers there, HTTP/2 streams against the
// connection caps. Each test states the invariant it checks; each failed
// on the code as reviewed then.

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// hostileListener is an upstream that runs serve on every connection,
// after reading the request head.
func hostileListener(t *testing.T, serve func(c net.Conn, r *http.Request)) string {
	t.Helper()
	return testkit.ServeTCP(t, func(c net.Conn) {
		if r, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			serve(c, r)
		}
	})
}

// TestUpgradeHeaderBomb: the WebSocket handshake reads the sandbox's
// answer with http.ReadResponse, which has no header size limit
// (textproto.ReadMIMEHeader is unbounded). A sandbox that answers its own
// user's upgrade request with an endless header makes the gateway hold
// everything it sends, for up to the 30 s handshake deadline: one hostile
// sandbox can exhaust the gateway's memory, and every other sandbox with
// it. The direct path refuses a head beyond 16 KiB; the upgrade path must
// refuse one beyond some bound too.
func TestUpgradeHeaderBomb(t *testing.T) {
	const limit = 64 << 20 // stop the proof here: far beyond any sane bound
	var sent atomic.Int64
	gaveUp := make(chan struct{}) // closed when a write fails: the gateway stopped reading
	var once sync.Once
	addr := hostileListener(t, func(c net.Conn, r *http.Request) {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
		line := []byte("X-Bomb: " + strings.Repeat("a", 4080) + "\r\n")
		for sent.Load() < limit {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			n, err := c.Write(line)
			sent.Add(int64(n))
			if err != nil {
				once.Do(func() { close(gaveUp) })
				return // the gateway gave up: good
			}
		}
	})
	srv, tok := gatewayTo(t, addr)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /hmr HTTP/1.1\r\nHost: sandbox-abc.%s\r\nAuthorization: Bearer %s\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		testDomain, tok)

	deadline := time.Now().Add(20 * time.Second)
	var peak uint64
	for sent.Load() < limit && time.Now().Before(deadline) {
		select {
		case <-gaveUp:
			deadline = time.Now() // nothing more comes: read the heap once more and stop
		case <-time.After(50 * time.Millisecond):
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	t.Logf("sandbox sent %d MiB of response head; gateway heap in use grew to %d MiB (from %d MiB)",
		sent.Load()>>20, peak>>20, before.HeapInuse>>20)
	if sent.Load() >= limit {
		t.Fatalf("the gateway took %d MiB of header from a sandbox on the upgrade path without refusing it (bound: upstream.MaxResponseHead)", sent.Load()>>20)
	}
}

// TestProxyHeaderBound: on the ReverseProxy path (any request with a
// body) the per-instance http.Transport keeps net/http's default
// MaxResponseHeaderBytes of 10 MiB, and the limit is reset after every
// interim answer, so one request takes up to (MaxInterim+1) x 10 MiB of
// headers from a sandbox and passes them to the client. The direct path
// refuses a head over 16 KiB with a 502. With a few hundred connections per
// client IP, a sandbox and its own client multiply that into gigabytes.
func TestProxyHeaderBound(t *testing.T) {
	big := "X-Big: " + strings.Repeat("b", 8<<20) + "\r\n"
	addr := hostileListener(t, func(c net.Conn, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		bw := bufio.NewWriterSize(c, 64<<10)
		for range 3 {
			io.WriteString(bw, "HTTP/1.1 103 Early Hints\r\n"+big+"\r\n")
		}
		io.WriteString(bw, "HTTP/1.1 200 OK\r\n"+big+"Content-Length: 2\r\n\r\nok")
		bw.Flush()
		time.Sleep(time.Second)
	})
	srv, tok := gatewayTo(t, addr)
	for _, method := range []string{"GET", "POST"} {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader("x")
		}
		req := abcRequest(method, srv.URL+"/", body, tok)
		var hints, leaked atomic.Int32
		req = req.WithContext(httptraceCount(req.Context(), &hints, &leaked))
		resp, err := (&http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxResponseHeaderBytes: 64 << 20}}).Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Logf("%s: status %d, %d interim answers, final X-Big %d bytes", method, resp.StatusCode, hints.Load(), len(resp.Header.Get("X-Big")))
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: got %d with %d MiB of sandbox headers, want 502 as for a head over the direct path's bound",
				method, resp.StatusCode, (int(hints.Load())+1)*len(big)>>20)
		}
	}
}

// TestInterimDropsGatewayHeaders: on the ReverseProxy path a 1xx
// from the sandbox makes httputil.ReverseProxy clear the whole response
// header map (it copies the 1xx's headers in, writes the 1xx, then
// clear(h)), so headers the gateway set before proxying — X-Request-Id —
// are missing from the final response. The direct path restores them
// (upstream.ForwardInterim); the two paths disagree.
func TestInterimDropsGatewayHeaders(t *testing.T) {
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
		}
		io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
		io.WriteString(w, okResponse("final"))
		return true
	})
	srv, tok := gatewayTo(t, addr)
	for _, method := range []string{"GET", "POST"} {
		req := abcRequest(method, srv.URL+"/", strings.NewReader(""), tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := resp.Header["X-Request-Id"]; len(got) != 1 || got[0] == "" {
			t.Errorf("%s: final response X-Request-Id %q after a 103, want the gateway's one", method, got)
		}
	}
}

// TestUpgradeInterim: a 1xx answer to an upgrade request is taken
// as the final answer: the gateway forwards the 103, then net/http makes
// up an empty 200 for the client (the handler wrote no final status), and
// the sandbox's real 101 is dropped. On the other two paths a 1xx is
// forwarded and the final answer read after it.
func TestUpgradeInterim(t *testing.T) {
	addr := hostileListener(t, func(c net.Conn, r *http.Request) {
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"+
			"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		time.Sleep(2 * time.Second)
	})
	srv, tok := gatewayTo(t, addr)
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /hmr HTTP/1.1\r\nHost: sandbox-abc.%s\r\nAuthorization: Bearer %s\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		testDomain, tok)
	br := bufio.NewReader(c)
	var statuses []int
	for range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode >= 200 || resp.StatusCode == 101 {
			break
		}
	}
	t.Logf("client got statuses %v", statuses)
	if len(statuses) == 0 || statuses[len(statuses)-1] != http.StatusSwitchingProtocols && statuses[len(statuses)-1] != http.StatusBadGateway {
		t.Fatalf("client got %v: a 1xx ended the upgrade handshake (want the 101 after it, or a 502)", statuses)
	}
}

// TestH2StreamsOutgrowConnectionCaps: the connection caps (#13 item
// 6) count client connections and budget one upstream descriptor for
// each (h1server.DefaultMaxConnections: (nofile-128)/2), but one HTTP/2
// connection carries up to 250 concurrent streams (net/http's default; the
// server sets no MaxConcurrentStreams), each holding its own upstream
// connection while the sandbox — the client's own — takes its time. With
// connections_per_ip at 2, one client IP here holds 200 upstream
// descriptors; with the default 256 it is 64,000, past the descriptor
// budget the global cap was derived from (admin listener included).
func TestH2StreamsOutgrowConnectionCaps(t *testing.T) {
	var upstreamConns atomic.Int32
	release := make(chan struct{})
	addr := hostileListener(t, func(c net.Conn, r *http.Request) {
		if r.URL.Path == "/warm" {
			io.WriteString(c, okResponse("warm"))
			return
		}
		upstreamConns.Add(1)
		<-release // a slow SSE endpoint, or an app that never answers
		io.WriteString(c, okResponse("late"))
	})
	t.Cleanup(func() { close(release) })
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	cfg := testConfig()
	cfg.Limits.ConnectionsPerIP = 2
	cfg.Limits.MaxConnections = 4
	g, err := New(cfg, fakes(eps), Options{}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	s := NewServer(cfg, g, testkit.Logger(t))
	s.TLSConfig = testkit.TLSConfig("h2", "http/1.1")
	srv := serve(t, s)
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	url := strings.Replace(srv.URL, "http://", "https://", 1)
	// One request first, so that every stream shares its connection.
	warm := abcRequest("GET", url+"/warm", nil, tok)
	resp, err := client.Do(warm)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("got %s, want HTTP/2", resp.Proto)
	}
	const streams = 200
	var finished atomic.Int32 // streams the client got an answer or an error for
	for i := range streams {
		go func() {
			defer finished.Add(1)
			req := abcRequest("GET", fmt.Sprintf("%s/sse-%d", url, i), nil, tok)
			req.Header.Set("Accept", "text/event-stream")
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// Wait until every stream has ended (refused, or its connection
	// closed at the cap) or holds an upstream connection, the sandbox
	// answering none: then no more can come. At most 10 s.
	deadline := time.Now().Add(10 * time.Second)
	for upstreamConns.Load()+finished.Load() < streams && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	n := upstreamConns.Load()
	t.Logf("client connections counted by the cap: %d; upstream connections held: %d", s.Conns.Open(), n)
	if int(n) > 2*cfg.Limits.ConnectionsPerIP {
		t.Fatalf("one client IP (connections_per_ip=%d) holds %d upstream connections through HTTP/2 streams", cfg.Limits.ConnectionsPerIP, n)
	}
}
