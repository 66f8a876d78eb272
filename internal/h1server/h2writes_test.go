package h1server

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testkit"
)

// An HTTP/2 client that stops granting a stream window cannot hold the
// stream's handler (and what it holds, a sandbox connection) beyond
// write_timeout per 4 KiB written: the stream is reset and the blocked
// write fails (#13). A client that takes a large write slowly but steadily
// is not reset.
// A stream idle between writes is not reset. (Bytes net/http flushes
// after the handler returned are not watched: h2writes.go says why.)
func TestStalledHTTP2StreamReset(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	cfg := testConfig()
	cfg.Limits.WriteTimeout = config.Duration(timeout)
	ended := make(chan error, 8)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch r.URL.Path {
		case "/big": // blocks in Write once the window is spent
			_, err = w.Write(bytes.Repeat([]byte("x"), 8<<10))
		case "/copy": // the proxy's copy buffer, taken slowly
			_, err = w.Write(bytes.Repeat([]byte("x"), 32<<10))
		case "/idle": // an SSE-like stream, idle for longer than the timeout
			w.Write([]byte("one"))
			http.NewResponseController(w).Flush()
			time.Sleep(3 * timeout)
			_, err = w.Write([]byte("two"))
		}
		ended <- err
	})
	s := New(cfg, h, nil)
	s.TLSConfig = testkit.TLSConfig("h2")
	addr := serve(t, s).Listener.Addr().String()

	for _, tc := range []struct {
		path    string
		window  uint32
		grant   uint32 // bytes of window granted every timeout/3
		want    string
		wantLen int
		wantErr bool
	}{
		{"/big", 0, 0, "reset", 0, true},
		{"/big", 1000, 0, "reset", 0, true},
		{"/idle", 65535, 0, "end", len("onetwo"), false},
		// 4 KiB per timeout/3: 32 KiB in about 2.7 timeouts, within the 8
		// it may take (a timeout per 4 KiB).
		{"/copy", 4096, 4096, "end", 32 << 10, false},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/")+"/window="+strconv.Itoa(int(tc.window)), func(t *testing.T) {
			c := testkit.DialH2(t, addr, tc.window)
			c.Get(1, "sandbox-a.preview.test", tc.path)
			if tc.grant > 0 {
				c.Grant(1, tc.grant, timeout/3)
			}
			got, n := c.StreamEnd(1, 10*time.Second)
			if got != tc.want {
				t.Fatalf("stream %s after %d bytes, want %s", got, n, tc.want)
			}
			if tc.want == "end" && n != tc.wantLen {
				t.Errorf("got %d bytes, want %d", n, tc.wantLen)
			}
			select {
			case err := <-ended:
				if (err != nil) != tc.wantErr {
					t.Errorf("handler's write error %v, want error %v", err, tc.wantErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not return")
			}
		})
	}
}
