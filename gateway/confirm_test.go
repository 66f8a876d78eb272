package gateway

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestUnconfirmedSendsNothing (#37, 1): a new connection whose peer the
// runtime does not confirm carries nothing, on the exchange's path and an
// upgrade's. ErrMoved re-ensures once and confirms the new connection
// again (still moved here: 502 sandbox_moved); a runtime that cannot be
// asked fails closed at once (503 unconfirmed, Retry-After). The app,
// listening on the address, never reads a request.
func TestUnconfirmedSendsNothing(t *testing.T) {
	t.Parallel()
	addr, conns := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		t.Errorf("the app read a request on an unconfirmed connection: %s %s", r.Method, r.URL)
		io.WriteString(w, okResponse("app"))
		return true
	})
	_, appPort, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		name     string
		err      error
		port     bool // on a port host (#22): moved is no port_refused
		code     int
		label    string
		confirms int32
		ensures  int32
	}{
		{"moved", sandboxmgr.ErrMoved, false, http.StatusBadGateway, "sandbox_moved", 2, 2},
		{"moved/port host", sandboxmgr.ErrMoved, true, http.StatusBadGateway, "sandbox_moved", 2, 2},
		{"runtime unreachable", runtime.ErrUnavailable, false, http.StatusServiceUnavailable, "unconfirmed", 1, 1},
	} {
		for _, upgrade := range []bool{false, true} {
			name := tc.name
			if upgrade {
				name += "/upgrade"
			}
			t.Run(name, func(t *testing.T) {
				for _, fe := range frontEnds {
					sb := &fakeSandboxes{addrs: []string{addr}, inst: "i1", confirmErr: tc.err}
					cfg := testConfig()
					host := "sandbox-abc." + testDomain
					if tc.port {
						p, _ := strconv.Atoi(appPort)
						cfg.Templates["app"].Port, cfg.Templates["app"].Ports = 1, []int{1, p}
						host = appPort + "-" + host
					}
					_, srv := startGatewayOpts(t, cfg, sb, Options{NetHTTPOnly: fe.netHTTPOnly})
					before := conns.Load()
					hdr := []string{}
					if upgrade {
						hdr = []string{"Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Version", "13",
							"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
					}
					resp := testkit.Request(t, srv, "GET", host, "/", testkit.Mint(t, cfg, "abc", time.Hour), hdr...)
					body, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != tc.code || errorCode(body) != tc.label {
						t.Errorf("%s: got %d %.200s, want %d %s", fe.name, resp.StatusCode, body, tc.code, tc.label)
					}
					if tc.code == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
						t.Errorf("%s: 503 without Retry-After", fe.name)
					}
					if n, e := sb.confirms.Load(), sb.ensures.Load(); n != tc.confirms || e != tc.ensures {
						t.Errorf("%s: %d confirmations and %d ensures, want %d and %d", fe.name, n, e, tc.confirms, tc.ensures)
					}
					// Every dial was made before the answer; the app's accepts
					// may lag behind it.
					testkit.WaitFor(t, "the app to accept one connection per confirmation", func() bool {
						return conns.Load()-before == tc.confirms
					})
				}
			})
		}
	}
}
