package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/previewgate/previewgate/internal/upstream"
)

// TestHostileInterim: interim 1xx answers are forwarded on both proxy paths
// and bounded the same way (upstream.MaxInterim): one more is a 502.
func TestHostileInterim(t *testing.T) {
	t.Parallel()
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		n := upstream.MaxInterim
		if r.URL.Query().Has("flood") {
			n++
		}
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
		}
		for range n {
			// Hop-by-hop headers on an interim answer stay on this hop.
			io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=1\r\n\r\n")
		}
		io.WriteString(w, okResponse("final"))
		return true
	})
	srv, tok := gatewayTo(t, addr)
	exchange := func(method, query string) (status int, hints, leaked int32) {
		var h, l atomic.Int32
		body := "" // bodiless: the direct path
		if method == "POST" {
			body = "x" // a body: ReverseProxy
		}
		req := abcRequest(method, srv.URL+"/"+query, strings.NewReader(body), tok)
		req = req.WithContext(httptraceCount(req.Context(), &h, &l))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, query, err)
			return 0, 0, 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, h.Load(), l.Load()
	}
	check := func(method, query string, want int) {
		status, hints, leaked := exchange(method, query)
		if status != want {
			t.Errorf("%s %s: got %d, want %d", method, query, status, want)
		}
		// A flood answers 502 after forwarding the bound's worth, no more.
		if hints != upstream.MaxInterim {
			t.Errorf("%s %s: got %d interim answers, want %d forwarded", method, query, hints, upstream.MaxInterim)
		}
		if leaked != 0 {
			t.Errorf("%s: %d interim answers reached the client with hop-by-hop headers", method, leaked)
		}
	}
	for _, method := range []string{"GET", "POST"} { // direct path, ReverseProxy
		check(method, "", 200)
		check(method, "?flood", 502)
	}
	// Concurrent exchanges each get their own interim answers, no more
	// (a trace shared between requests would mix them; -race sees it).
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { check("POST", "", 200) })
	}
	wg.Wait()
}

// httptraceCount counts the 1xx answers a client receives.
func httptraceCount(ctx context.Context, n, leaked *atomic.Int32) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
			n.Add(1)
			if h.Get("X-Hop") != "" || h.Get("Keep-Alive") != "" || h.Get("Connection") != "" {
				leaked.Add(1)
			}
			return nil
		},
	})
}
