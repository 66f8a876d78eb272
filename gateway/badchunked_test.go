package gateway

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestMalformedChunkedBody: a client whose chunked request body is
// malformed (a size written 0x5, a size that overflows, a chunk line
// ending in a bare LF) gets 400, not 502 upstream_failed: the fault is
// its own. The app never sees that request (not even its head: it would
// take it for an empty POST), on both front ends, and the gateway's log
// line names the preview's host and sandbox, not the app's local Host.
func TestMalformedChunkedBody(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		b, err := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s body %q err %v", r.Method, r.URL.Path, b, err))
		mu.Unlock()
		io.WriteString(w, okResponse("ok "+r.URL.Path))
		return err == nil
	})
	for _, fe := range frontEnds {
		for _, tc := range []struct{ name, body string }{
			{"hex prefix", "0x5\r\nhello\r\n0\r\n\r\n"},
			{"overflowing size", "10000000000000000\r\nhello\r\n0\r\n\r\n"},
			{"bare LF", "5\nhello\n0\n\n"},
			{"bare LF after good data", "5\r\nhello\r\n5\nworld\r\n0\r\n\r\n"},
		} {
			t.Run(fe.name+"/"+tc.name, func(t *testing.T) {
				var logs syncBuffer
				log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				cfg := testConfig()
				eps := &endpoints{}
				eps.set("abc", addr, "i1")
				g, err := New(cfg, fakes(eps), Options{NetHTTPOnly: fe.netHTTPOnly}, log)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(g.Close)
				srv := serve(t, NewServer(cfg, g, testkit.Logger(t)))
				mu.Lock()
				before := len(seen)
				mu.Unlock()
				c, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				tok := testkit.Mint(t, cfg, "abc", time.Minute)
				fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: sandbox-abc.%s\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n%s",
					testDomain, tok, tc.body)
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("got %d %s, want 400", resp.StatusCode, b)
				}
				time.Sleep(100 * time.Millisecond) // for a head the app might still be reading
				mu.Lock()
				got := append([]string(nil), seen[before:]...)
				mu.Unlock()
				if strings.HasPrefix(tc.name, "bare LF after") {
					// The app had the head and a chunk: it must not get a
					// complete request (an empty or cut body as if whole).
					for _, s := range got {
						if strings.HasSuffix(s, "err <nil>") {
							t.Errorf("the app got a complete request: %s", s)
						}
					}
				} else if len(got) != 0 {
					t.Errorf("the app got %q, want nothing", got)
				}
				l := logs.String()
				if !strings.Contains(l, "sandbox=abc") || !strings.Contains(l, "host=sandbox-abc."+testDomain) || strings.Contains(l, "host=localhost") {
					t.Errorf("log %q: want the failure logged with host=sandbox-abc.%s and sandbox=abc", l, testDomain)
				}
			})
		}
	}
}
