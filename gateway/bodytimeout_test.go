package gateway

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/net/http2"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// statusMetrics records the status of each finished request.
type statusMetrics struct {
	noMetrics
	got chan int
}

func (m statusMetrics) Request(_ string, status int, _ time.Duration, _ bool) {
	select {
	case m.got <- status:
	default:
	}
}

// lockedBuffer is a log sink the server's goroutines share with the test.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBodyTimeoutStatus: a client that stops sending its request body
// past limits.body_timeout gets 408, over HTTP/1.1 and HTTP/2, and the
// metrics and access log record 408; one that leaves mid-body is recorded
// as 499, and only an upgrade as 101. Before, net/http's empty 200 went out and the log said 101
// (#24, item 8). On the lean loop's server and net/http's alike: bodies
// are never the lean loop's, so both must hand them on the same way.
func TestBodyTimeoutStatus(t *testing.T) {
	t.Parallel()
	// The app reads the whole body before it answers, as an upload
	// handler does.
	// /websocket accepts a WebSocket, whose request is recorded as 101.
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/websocket" {
			if c, err := websocket.Accept(w, r, nil); err == nil {
				c.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d", n)
	}))
	t.Cleanup(app.Close)
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Limits.BodyTimeout = config.Duration(300 * time.Millisecond)
			cfg.Log.Access = true
			var logs lockedBuffer
			m := statusMetrics{got: make(chan int, 1)}
			g, err := New(cfg, fakes(&fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}), Options{TLS: true, Metrics: m, NetHTTPOnly: fe.netHTTPOnly},
				slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			s := NewServer(cfg, g, testkit.Logger(t))
			s.TLSConfig = testkit.TLSConfig("h2", "http/1.1")
			addr := serve(t, s).Listener.Addr().String()
			tok := testkit.Mint(t, cfg, "abc", time.Minute)
			h2 := &http2.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
			t.Cleanup(h2.CloseIdleConnections)

			for _, tc := range []struct {
				name string
				send func(t *testing.T, path string) int // the status the client got; 0: none
				want int
			}{
				{"http1/stalls", func(t *testing.T, path string) int {
					c := dialTLS(t, addr, "http/1.1")
					fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: sandbox-abc.%s\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\nabc", path, testDomain, tok)
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						t.Fatalf("no answer: %v", err)
					}
					resp.Body.Close()
					return resp.StatusCode
				}, http.StatusRequestTimeout},
				{"http1/leaves", func(t *testing.T, path string) int {
					c := dialTLS(t, addr, "http/1.1")
					fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: sandbox-abc.%s\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\nabc", path, testDomain, tok)
					time.Sleep(100 * time.Millisecond) // the request is on its way to the app
					c.Close()
					return 0
				}, statusClientClosed},
				{"http2/stalls", func(t *testing.T, path string) int {
					pr, pw := io.Pipe()
					t.Cleanup(func() { pw.Close() })
					go io.WriteString(pw, "abc")
					req, _ := http.NewRequest("POST", "https://"+addr+path, pr)
					req.Host = "sandbox-abc." + testDomain
					req.ContentLength = 1000
					req.Header.Set("Authorization", "Bearer "+tok)
					resp, err := (&http.Client{Transport: h2, Timeout: 10 * time.Second}).Do(req)
					if err != nil {
						t.Fatalf("no answer: %v", err)
					}
					resp.Body.Close()
					return resp.StatusCode
				}, http.StatusRequestTimeout},
				{"websocket", func(t *testing.T, path string) int {
					hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
					c, resp, err := websocket.Dial(t.Context(), "wss://"+addr+path, &websocket.DialOptions{HTTPClient: hc,
						Host: "sandbox-abc." + testDomain, HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
					if err != nil {
						t.Fatalf("websocket: %v", err)
					}
					c.CloseNow()
					return resp.StatusCode
				}, http.StatusSwitchingProtocols},
			} {
				t.Run(tc.name, func(t *testing.T) {
					path := "/" + tc.name
					if got := tc.send(t, path); got != 0 && got != tc.want {
						t.Errorf("client got %d, want %d", got, tc.want)
					}
					select {
					case got := <-m.got:
						if got != tc.want {
							t.Errorf("metrics got status %d, want %d", got, tc.want)
						}
					case <-time.After(10 * time.Second):
						t.Fatal("no request recorded within 10s")
					}
					// The access log line follows the metrics.
					want := fmt.Sprintf("path=%s status=%d", path, tc.want)
					for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), want); {
						if time.Now().After(deadline) {
							t.Fatalf("access log lacks %q:\n%s", want, logs.String())
						}
						time.Sleep(10 * time.Millisecond)
					}
				})
			}
		})
	}
}

// dialTLS connects to addr with TLS offering proto (any certificate).
func dialTLS(t *testing.T, addr, proto string) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
