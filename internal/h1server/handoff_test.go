package h1server

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestServerHandsOver: whatever the lean loop does not serve reaches
// net/http intact, with the bytes already read, on the same connection.
func TestServerHandsOver(t *testing.T) {
	t.Parallel()
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s body=%q upgrade=%q", r.Proto, r.Method, r.URL.Path, b, r.Header.Get("Upgrade"))
	})
	s := NewServer(testConfig(), leanAll{echo}, testkit.Logger(t))
	addr := serve(t, s).Listener.Addr().String()
	cases := []struct {
		name, raw, want string
		status          int
	}{
		{"post with body", "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", `HTTP/1.1 POST /p body="abc"`, 200},
		{"chunked body", "PUT /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", `HTTP/1.1 PUT /p body="abc"`, 200},
		{"http/1.0", "GET /old HTTP/1.0\r\nHost: x\r\n\r\n", `HTTP/1.0 GET /old body=""`, 200},
		{"upgrade", "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", `upgrade="websocket"`, 200},
		{"connection option", "GET /c HTTP/1.1\r\nHost: x\r\nConnection: X-Hop\r\nX-Hop: 1\r\n\r\n", `GET /c`, 200},
		{"absolute form", "GET http://x/abs HTTP/1.1\r\nHost: x\r\n\r\n", `GET /abs`, 200},
		{"bare LF", "GET /lf HTTP/1.1\nHost: x\n\n", `GET /lf`, 200},
		{"long head", "GET /long HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 20<<10) + "\r\n\r\n", `GET /long`, 200},
		{"no host", "GET /nohost HTTP/1.1\r\n\r\n", "", 400},
		{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n", "", 400},
		{"obs-fold", "GET /fold HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n", "GET /fold", 200},
		{"junk", "HELLO\r\n\r\n", "", 400},
		{"over max_header_bytes", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 80<<10) + "\r\n\r\n", "", 431},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.leanN.Load()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			// A lean request first, then the one to hand over, pipelined.
			if _, err := io.WriteString(c, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"+tc.raw); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			first, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, first.Body)
			if n := s.leanN.Load() - before; n != 1 {
				t.Errorf("lean loop served %d requests, want 1 (the first)", n)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("second response: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, body, tc.status, tc.want)
			}
		})
	}
}

// TestServerTLS: HTTP/2 clients get net/http's HTTP/2; HTTP/1.1 clients
// get the lean loop, with the TLS state on the request.
func TestServerTLS(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s tls=%v", r.Proto, r.TLS != nil)
	})
	s := NewServer(testConfig(), leanAll{h}, testkit.Logger(t))
	s.TLSConfig = testkit.TLSConfig("h2", "http/1.1")
	srv := serve(t, s)
	for _, tc := range []struct {
		proto string
		h2    bool
		lean  uint64
	}{{"HTTP/2.0", true, 0}, {"HTTP/1.1", false, 2}} {
		before := s.leanN.Load()
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: tc.h2}
		if !tc.h2 {
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		for range 2 {
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := tc.proto + " tls=true"; string(b) != want {
				t.Errorf("got %q, want %q", b, want)
			}
		}
		tr.CloseIdleConnections()
		if n := s.leanN.Load() - before; n != tc.lean {
			t.Errorf("%s: lean loop served %d requests, want %d", tc.proto, n, tc.lean)
		}
	}
}
