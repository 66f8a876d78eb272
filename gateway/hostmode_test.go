package gateway

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// identityApp answers / and /ws with what identity it was reached by
// (Host, Origin, X-Forwarded-*), and /redirect with Location: ?to=.
func identityApp(t testing.TB) *httptest.Server {
	seen := func(r *http.Request) []byte {
		b, _ := json.Marshal(map[string]string{"host": r.Host, "origin": r.Header.Get("Origin"),
			"xfh": r.Header.Get("X-Forwarded-Host"), "xfp": r.Header.Get("X-Forwarded-Proto"),
			"xff": r.Header.Get("X-Forwarded-For")})
		return b
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write(seen(r)) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("to"))
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		b := seen(r)
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.Write(r.Context(), websocket.MessageText, b)
		c.Close(websocket.StatusNormalClosure, "")
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

type identity struct{ Host, Origin, XFH, XFP, XFF string }

// TestHostModes: what the app sees of Host and Origin in each host mode,
// on plain requests and upgrades, on both proxy paths (#22).
func TestHostModes(t *testing.T) {
	t.Parallel()
	app := identityApp(t)
	_, port, _ := net.SplitHostPort(app.Listener.Addr().String())
	local := "localhost:" + port
	preview := "sandbox-abc." + testDomain
	own := "http://" + preview
	for _, tc := range []struct {
		name           string
		mode           string
		wantHost       string
		wantWSOrigin   string // for an upgrade from the preview's own origin
		wantPostOrigin string // for a plain request from it: never changed
	}{
		{"local", config.HostLocal, local, "http://" + local, own},
		{"preserve", config.HostPreserve, preview, own, own},
		{"rewrite", config.HostRewrite, app.Listener.Addr().String(), own, own},
	} {
		for _, fe := range frontEnds {
			t.Run(tc.name+"/"+fe.name, func(t *testing.T) {
				t.Parallel()
				cfg := testConfig()
				if tc.mode != config.HostLocal {
					cfg.Templates["app"].HostHeader = tc.mode
				} // else: the default
				_, srv := startGatewayOpts(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, Options{NetHTTPOnly: fe.netHTTPOnly})
				tok := testkit.Mint(t, cfg, "abc", time.Minute)

				for _, method := range []string{"GET", "POST"} {
					resp := testkit.Request(t, srv, method, preview, "/", tok, "Origin", own)
					var got identity
					json.NewDecoder(resp.Body).Decode(&got)
					resp.Body.Close()
					if got.Host != tc.wantHost || got.Origin != tc.wantPostOrigin {
						t.Errorf("%s: app saw Host %q Origin %q, want %q %q", method, got.Host, got.Origin, tc.wantHost, tc.wantPostOrigin)
					}
					if got.XFH != preview || got.XFP != "http" || got.XFF != "127.0.0.1" {
						t.Errorf("%s: app saw X-Forwarded-Host %q -Proto %q -For %q, want the real ones", method, got.XFH, got.XFP, got.XFF)
					}
				}

				for _, origin := range []string{own, "https://evil.example"} {
					want := tc.wantWSOrigin
					if origin != own {
						want = origin // not the preview's own: the app's check decides
					}
					got := socketIdentity(t, srv, preview, http.Header{"Authorization": {"Bearer " + tok}, "Origin": {origin}})
					if got.Host != tc.wantHost || got.Origin != want || got.XFH != preview {
						t.Errorf("upgrade from %s: app saw Host %q Origin %q X-Forwarded-Host %q, want %q %q %q",
							origin, got.Host, got.Origin, got.XFH, tc.wantHost, want, preview)
					}
				}
			})
		}
	}
}

// socketIdentity opens /ws through the gateway and returns what the app
// saw of the upgrade.
func socketIdentity(t *testing.T, srv *httptest.Server, host string, h http.Header) identity {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &websocket.DialOptions{Host: host, HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var got identity
	json.Unmarshal(b, &got)
	return got
}

// TestHostLocalOriginCheckFirst: the gateway's own cross-site check stays
// in front of the local mode: a cookie-authenticated upgrade from another
// origin is refused before any Origin is rewritten.
func TestHostLocalOriginCheckFirst(t *testing.T) {
	t.Parallel()
	app := identityApp(t)
	cfg := testConfig()
	_, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}})
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	preview := "sandbox-abc." + testDomain
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &websocket.DialOptions{Host: preview,
		HTTPHeader: http.Header{"Cookie": {auth.DefaultCookieName + "=" + tok}, "Origin": {"https://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("got %v (response %v), want 403", err, resp)
	}
	got := socketIdentity(t, srv, preview, http.Header{"Cookie": {auth.DefaultCookieName + "=" + tok}, "Origin": {"http://" + preview}})
	_, port, _ := net.SplitHostPort(app.Listener.Addr().String())
	if want := "http://localhost:" + port; got.Origin != want {
		t.Errorf("cookie-authenticated upgrade from the preview: app saw Origin %q, want %q", got.Origin, want)
	}
}

// TestHostLocalLocation: a Location at the app's local identity is mapped
// back to the preview; others pass unchanged.
func TestHostLocalLocation(t *testing.T) {
	t.Parallel()
	app := identityApp(t)
	_, port, _ := net.SplitHostPort(app.Listener.Addr().String())
	preview := "sandbox-abc." + testDomain
	for _, fe := range frontEnds {
		cfg := testConfig()
		_, srv := startGatewayOpts(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, Options{NetHTTPOnly: fe.netHTTPOnly})
		tok := testkit.Mint(t, cfg, "abc", time.Minute)
		for _, tc := range []struct{ to, want string }{
			{"http://localhost:" + port + "/next?x=1", "//" + preview + "/next?x=1"},
			{"http://LocalHost:" + port, "//" + preview},
			{"//localhost:" + port + "/p", "//" + preview + "/p"},
			{"https://localhost:" + port + "#f", "//" + preview + "#f"},
			{"http://localhost:" + port + "1/other-port", "http://localhost:" + port + "1/other-port"},
			{"http://localhost/no-port", "http://localhost/no-port"},
			{"/relative", "/relative"},
			{"https://elsewhere.example/", "https://elsewhere.example/"},
		} {
			req, _ := http.NewRequest("GET", srv.URL+"/redirect?to="+url.QueryEscape(tc.to), nil)
			req.Host = preview
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Location"); got != tc.want {
				t.Errorf("%s: app's Location %q reached the client as %q, want %q", fe.name, tc.to, got, tc.want)
			}
		}
	}
}
