package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestClientWriteTimeout: a client that asks for a large response and
// never reads it is cut after limits.write_timeout, on the lean loop and
// on net/http: the sandbox sees its response fail instead of a goroutine
// and two descriptors held for as long as the client stays.
func TestClientWriteTimeout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw connections are Linux-only")
	}
	t.Parallel()
	aborted := make(chan error, 4)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 1024 { // 64 MiB
			if _, err := w.Write(chunk); err != nil {
				aborted <- err
				return
			}
		}
		aborted <- nil
	})
	addr, _ := rawAppHTTP(t, app)
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	edit := func(c *config.Config) { c.Limits.WriteTimeout = config.Duration(300 * time.Millisecond) }
	onBothLoops(t, eps, edit, func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
		c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		fmt.Fprintf(c, "GET /big HTTP/1.1\r\nHost: sandbox-abc.%s\r\nAuthorization: Bearer %s\r\n\r\n",
			testDomain, testkit.Mint(t, cfg, "abc", time.Minute))
		select {
		case err := <-aborted:
			if err == nil {
				t.Fatal("the whole response went out to a client that never read")
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the app is still writing 20s in: the client's stalled connection was not cut")
		}
	})
}

// rawAppHTTP serves h on a loopback listener until the test ends.
func rawAppHTTP(t *testing.T, h http.Handler) (string, *http.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String(), s
}
