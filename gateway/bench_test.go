package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// discardWriter is a minimal ResponseWriter so the benchmark measures the
// handler chain, not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkHandlerChain runs one cookie-authenticated GET through the whole
// handler chain (host routing, cached token check, limits, activity, proxy)
// to a loopback backend answering 1 KiB.
func BenchmarkHandlerChain(b *testing.B) {
	cfg, g := benchGateway(b)
	tok := testkit.Mint(b, cfg, "abc", time.Hour)
	req := httptest.NewRequest("GET", "http://sandbox-abc."+testDomain+"/assets/app.js", nil)
	req.Header.Set("Cookie", auth.DefaultCookieName+"="+tok)
	req.Header.Set("Accept", "*/*")
	req.RemoteAddr = "127.0.0.1:40000"
	w := &discardWriter{h: http.Header{}}
	g.ServeHTTP(w, req) // warm the token cache and the connection pool
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clear(w.h)
		delete(req.Header, "X-Request-Id") // the gateway set it: each request is a fresh one
		g.ServeHTTP(w, req)
	}
}

// BenchmarkLeanChain is BenchmarkHandlerChain through the real Server: a
// keep-alive client connection, the lean HTTP/1.1 loop, the handler
// chain and the direct proxy path, to a loopback backend answering 1 KiB.
func BenchmarkLeanChain(b *testing.B) {
	cfg, g := benchGateway(b)
	s := NewServer(cfg, g, nil)
	srv := serve(b, s)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := "GET /assets/app.js HTTP/1.1\r\nHost: sandbox-abc." + testDomain + "\r\nAccept: */*\r\nCookie: " +
		auth.DefaultCookieName + "=" + testkit.Mint(b, cfg, "abc", time.Hour) + "\r\n\r\n"
	br := bufio.NewReader(c)
	do := func() {
		if _, err := io.WriteString(c, req); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := io.Copy(io.Discard, resp.Body); n != 1024 {
			b.Fatalf("got %d bytes, status %d", n, resp.StatusCode)
		}
	}
	do()
	if s.LeanRequests() != 1 {
		b.Fatal("the request did not take the lean loop")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		do()
	}
}

// benchGateway returns a gateway (closed when b ends) proxying every
// sandbox to a loopback backend answering 1 KiB.
func benchGateway(b *testing.B) (*config.Config, *Gateway) {
	body := strings.Repeat("x", 1024)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	b.Cleanup(app.Close)
	cfg := testConfig()
	g, err := New(cfg, fakes(&fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}), Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(g.Close)
	return cfg, g
}
