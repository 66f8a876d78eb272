package gateway

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/internal/upstream"
)

// TestResponseHeadBound (#21): a sandbox's response head, final or
// interim (1xx), is bounded by upstream.MaxResponseHead on every proxy
// path alike. A head of exactly the bound reaches the client whole; one
// byte more is a 502 upstream_head_too_large, whether the request took the
// direct path (a bodiless GET, on the lean loop unless PREVIEWGATE_LEAN is
// off, and over HTTP/2), ReverseProxy (a POST with a body, over HTTP/1.1
// and HTTP/2) or the WebSocket handshake. Before, the same head passed on
// one path and failed on another (16, 64 and 80 KiB).
func TestResponseHeadBound(t *testing.T) {
	t.Parallel()
	// The app answers /final?n=N with a final head of N bytes and
	// /interim?n=N with a 103 of N bytes before a small final answer: a
	// 101 to an upgrade request, else a 200.
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		io.Copy(io.Discard, r.Body)
		var n int
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		status, extra, body := "200 OK", "Content-Length: 2\r\n", "ok"
		if r.Header.Get("Upgrade") != "" {
			status, extra, body = "101 Switching Protocols", "Upgrade: websocket\r\nConnection: Upgrade\r\n", ""
		}
		if r.URL.Path == "/interim" {
			io.WriteString(w, testkit.SizedHead("103 Early Hints", "", n)+"HTTP/1.1 "+status+"\r\n"+extra+"\r\n"+body)
		} else {
			io.WriteString(w, testkit.SizedHead(status, extra, n)+body)
		}
		return true
	})
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	cfg := testConfig()
	g, srv := startGateway(t, cfg, eps)
	tlsServer := NewServer(cfg, g, testkit.Logger(t))
	tlsServer.TLSConfig = testkit.TLSConfig("h2", "http/1.1")
	tlsSrv := serve(t, tlsServer)
	tok := testkit.Mint(t, cfg, "abc", time.Minute)

	h1 := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	h2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h2.CloseIdleConnections)

	paths := []struct {
		name string
		do   func(t *testing.T, target string) headResult
	}{
		{"HTTP/1.1 GET (direct path)", func(t *testing.T, target string) headResult {
			return headExchange(t, h1, 1, abcRequest("GET", srv.URL+target, nil, tok))
		}},
		{"HTTP/1.1 POST (ReverseProxy)", func(t *testing.T, target string) headResult {
			return headExchange(t, h1, 1, abcRequest("POST", srv.URL+target, strings.NewReader("payload"), tok))
		}},
		{"HTTP/2 GET (direct path)", func(t *testing.T, target string) headResult {
			return headExchange(t, h2, 2, abcRequest("GET", tlsSrv.URL+target, nil, tok))
		}},
		{"HTTP/2 POST (ReverseProxy)", func(t *testing.T, target string) headResult {
			return headExchange(t, h2, 2, abcRequest("POST", tlsSrv.URL+target, strings.NewReader("payload"), tok))
		}},
		{"WebSocket upgrade", func(t *testing.T, target string) headResult {
			return upgradeExchange(t, srv, target, tok)
		}},
	}
	const bound = upstream.MaxResponseHead
	for _, p := range paths {
		for _, head := range []string{"final", "interim"} {
			for _, n := range []int{bound, bound + 1} {
				t.Run(fmt.Sprintf("%s/%s/%d", p.name, head, n), func(t *testing.T) {
					t.Parallel()
					res := p.do(t, fmt.Sprintf("/%s?n=%d", head, n))
					if n > bound {
						if res.status != http.StatusBadGateway || res.code != "upstream_head_too_large" {
							t.Fatalf("got %d %q, want 502 upstream_head_too_large", res.status, res.code)
						}
						if res.interimBig != 0 {
							t.Errorf("got a 1xx with %d bytes of X-Big before the 502, want none", res.interimBig)
						}
						return
					}
					want := http.StatusOK
					if p.name == "WebSocket upgrade" {
						want = http.StatusSwitchingProtocols
					}
					if res.status != want {
						t.Fatalf("got %d %q, want %d", res.status, res.code, want)
					}
					// The head reached the client whole.
					got, wantBig := res.finalBig, testkit.SizedHeadPad("200 OK", "Content-Length: 2\r\n", n)
					switch {
					case head == "interim":
						got, wantBig = res.interimBig, testkit.SizedHeadPad("103 Early Hints", "", n)
					case want == http.StatusSwitchingProtocols:
						wantBig = testkit.SizedHeadPad("101 Switching Protocols", "Upgrade: websocket\r\nConnection: Upgrade\r\n", n)
					}
					if got != wantBig {
						t.Errorf("got X-Big of %d bytes, want %d", got, wantBig)
					}
				})
			}
		}
	}
}

// headResult is what a client got: the final status, the error code of a
// JSON error, and the length of the X-Big field of the final answer and
// of a 1xx before it.
type headResult struct {
	status               int
	code                 string
	finalBig, interimBig int
}

// headExchange sends req with client, which must speak HTTP/proto.
func headExchange(t *testing.T, client *http.Client, proto int, req *http.Request) headResult {
	t.Helper()
	var interimBig atomic.Int64
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
			interimBig.Store(int64(len(h.Get("X-Big"))))
			return nil
		},
	}))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != proto {
		t.Fatalf("got HTTP/%d, want HTTP/%d", resp.ProtoMajor, proto)
	}
	body, _ := io.ReadAll(resp.Body)
	return headResult{status: resp.StatusCode, code: errorCode(body),
		finalBig: len(resp.Header.Get("X-Big")), interimBig: int(interimBig.Load())}
}

// upgradeExchange sends a WebSocket upgrade request for target to the
// gateway at srv and reads the answer, 1xx included.
func upgradeExchange(t *testing.T, srv *httptest.Server, target, tok string) headResult {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: sandbox-abc.%s\r\nAuthorization: Bearer %s\r\nAccept: application/json\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		target, testDomain, tok)
	br := bufio.NewReader(c)
	var res headResult
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("read the gateway's answer: %v", err)
		}
		if resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			res.interimBig = len(resp.Header.Get("X-Big"))
			continue
		}
		res.status, res.finalBig = resp.StatusCode, len(resp.Header.Get("X-Big"))
		if resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(resp.Body)
			res.code = errorCode(body)
		}
		return res
	}
}

// errorCode is the code of the gateway's JSON error body, or "".
func errorCode(body []byte) string {
	var e struct{ Code string }
	json.Unmarshal(body, &e)
	return e.Code
}
