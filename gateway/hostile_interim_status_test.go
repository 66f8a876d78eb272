package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/traffic"
)

// TestHostileInterimStatus: an app that sends a 103 before its final
// answer cannot choose the status the gateway records. The request log
// (and the metrics and access log, which read the same status) show the
// final status the client got, not the interim one, on both proxy paths
// and both loops: else an app could hide its 5xx from the operator's
// alerts behind an Early Hints.
func TestHostileInterimStatus(t *testing.T) {
	t.Parallel()
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
		}
		io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
		io.WriteString(w, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\ndown")
		return true
	})
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	for _, lean := range []bool{true, false} {
		cfg := testConfig()
		rec := traffic.New(traffic.Options{})
		g, err := New(cfg, fakes(eps), Options{Traffic: rec, NetHTTPOnly: !lean}, testkit.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		srv := serve(t, NewServer(cfg, g, testkit.Logger(t)))
		tok := testkit.Mint(t, cfg, "abc", time.Minute)
		for _, method := range []string{"GET", "POST"} { // direct path, ReverseProxy
			body := ""
			if method == "POST" {
				body = "x"
			}
			resp, err := http.DefaultClient.Do(abcRequest(method, srv.URL+"/", strings.NewReader(body), tok))
			if err != nil {
				t.Fatalf("lean=%v %s: %v", lean, method, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 503 {
				t.Errorf("lean=%v %s: client got %d, want 503", lean, method, resp.StatusCode)
			}
			// Recorded after the handler returned: wait for it.
			deadline := time.Now().Add(5 * time.Second)
			var last []traffic.Request
			for {
				if last = rec.Last("abc", 1); len(last) == 1 && last[0].Method == method || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if len(last) != 1 || last[0].Status != 503 {
				t.Errorf("lean=%v %s: recorded %+v, want status 503", lean, method, last)
			}
		}
	}
}
