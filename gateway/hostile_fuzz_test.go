package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// FuzzPoolReuse feeds an arbitrary upstream byte stream as the answer to
// one user's request and then sends a second user's request for the same
// sandbox instance. Whatever the stream holds (extra responses, broken
// framing, interim answers, a 101, an early end), the second user gets
// either a fresh connection's answer or, when the first response ended
// exactly, the reused connection's answer to its own request: never a
// byte of the first stream (connPool invariants 3 and 4).
func FuzzPoolReuse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nSet-Cookie: planted=1\r\nContent-Length: 7\r\n\r\nplanted",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nplanted",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\nplanted",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nplanted",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\nplanted",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	cfg := testConfig()
	eps := &endpoints{}
	g, err := New(cfg, fakes(eps), Options{}, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer g.Close()
	tok := testkit.Mint(f, cfg, "abc", time.Hour)
	var seq atomic.Int64
	f.Fuzz(func(t *testing.T, stream []byte, head bool) {
		nonce := make([]byte, 8)
		rand.Read(nonce)
		reuse, fresh := "reuse-"+hex.EncodeToString(nonce), "fresh-"+hex.EncodeToString(nonce)
		addr, _ := rawApp(t, func(w io.Writer, conn, nth int, r *http.Request) bool {
			switch {
			case conn == 1 && nth == 1:
				w.Write(stream)
				return true
			case nth == 1:
				io.WriteString(w, okResponse(fresh))
			default:
				io.WriteString(w, okResponse(reuse))
			}
			return true
		})
		inst := fmt.Sprintf("i%d", seq.Add(1))
		eps.set("abc", addr, inst)
		do := func(user string) (int, string) {
			method := "GET"
			if head && user == "first" {
				method = "HEAD"
			}
			// A first answer the stream leaves unfinished ends with this
			// context: cut short, its connection must not be pooled, however
			// soon that is, so its wait is short (it sets how many inputs a
			// fuzz run tries). The second user's answer is always whole:
			// its wait is long, so a loaded machine cannot fail it.
			wait := 5 * time.Second
			if user == "first" {
				wait = 30 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, method, "http://sandbox-abc."+testDomain+"/"+user, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			rec := httptest.NewRecorder()
			func() {
				defer func() { recover() }() // http.ErrAbortHandler on a broken body
				g.ServeHTTP(rec, req)
			}()
			return rec.Code, rec.Body.String()
		}
		do("first")
		code, body := do("second")
		if code != 200 || (body != fresh && body != reuse) {
			t.Fatalf("second user got %d %q, want 200 %q or %q", code, body, fresh, reuse)
		}
		if strings.Contains(body, "planted") {
			t.Fatalf("second user got the first stream's bytes: %q", body)
		}
	})
}
