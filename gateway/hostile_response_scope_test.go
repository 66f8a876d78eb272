package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestHostileResponseScope: what a sandbox's answer could do to every
// other preview under the shared parent domain is cut to its own host,
// on each path an answer takes (direct, ReverseProxy, an upgrade's
// refusal, its 101) and on both loops: a Set-Cookie for the parent domain
// arrives host-only, Clear-Site-Data arrives without "cookies" (a browser
// would clear every preview's cookies, the gateway's tokens with them),
// and the X-Request-Id the user sees is the gateway's, not one the app
// forged.
func TestHostileResponseScope(t *testing.T) {
	t.Parallel()
	const hostile = "Set-Cookie: toss=1; Domain=" + testDomain + "; Path=/\r\n" +
		"Set-Cookie: own=2; Path=/\r\n" +
		"Clear-Site-Data: \"cookies\", \"cache\"\r\n" +
		"X-Request-Id: forged\r\n"
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
		}
		switch {
		case r.Header.Get("Upgrade") != "" && r.URL.Path == "/switch":
			io.WriteString(w, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+hostile+"\r\n")
			return false
		case r.Header.Get("Upgrade") != "":
			io.WriteString(w, "HTTP/1.1 403 Forbidden\r\n"+hostile+"Content-Length: 2\r\n\r\nno")
		default:
			io.WriteString(w, "HTTP/1.1 200 OK\r\n"+hostile+"Content-Length: 2\r\n\r\nok")
		}
		return true
	})
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	onBothLoops(t, eps, nil, func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
		tok := testkit.Mint(t, cfg, "abc", time.Minute)
		for _, c := range []struct{ name, method, path string }{
			{"direct", "GET", "/"}, {"ReverseProxy", "POST", "/"},
			{"upgrade refused", "GET", "/refuse"}, {"101", "GET", "/switch"},
		} {
			body := ""
			if c.method == "POST" {
				body = "x"
			}
			req := abcRequest(c.method, srv.URL+c.path, strings.NewReader(body), tok)
			if strings.HasPrefix(c.name, "upgrade") || c.name == "101" {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			resp.Body.Close()
			for _, sc := range resp.Header["Set-Cookie"] {
				if strings.Contains(strings.ToLower(sc), "domain") {
					t.Errorf("%s: the client got Set-Cookie %q, a cookie for every preview", c.name, sc)
				}
			}
			if got := resp.Header["Set-Cookie"]; len(got) != 2 {
				t.Errorf("%s: Set-Cookie %q, want both cookies, host-only", c.name, got)
			}
			if got := strings.Join(resp.Header["Clear-Site-Data"], ","); got != `"cache"` {
				t.Errorf("%s: Clear-Site-Data %q, want only \"cache\"", c.name, got)
			}
			if id := resp.Header["X-Request-Id"]; len(id) != 1 || id[0] == "forged" {
				t.Errorf("%s: X-Request-Id %q, want the gateway's alone", c.name, id)
			}
		}
	})
}
