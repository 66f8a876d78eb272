package gateway

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// forgedIdentity are client-identity fields a client forges, in the
// spellings an app or its framework may believe (a CGI-style server reads
// X_Real_IP as X-Real-IP).
var forgedIdentity = []string{
	"X-Real-IP", "6.6.6.1", "True-Client-IP", "6.6.6.2", "Client-IP", "6.6.6.3",
	"X-Client-IP", "6.6.6.4", "X-Forwarded-Port", "1", "X-Forwarded-Prefix", "/admin",
	"X-Forwarded-Server", "evil", "X-Forwarded-Scheme", "https", "X-Original-URL", "/admin",
	"X-Rewrite-URL", "/admin", "Via", "1.1 evil", "X_Real_IP", "6.6.6.5", "x_forwarded_for", "6.6.6.6",
	"X-Forwarded-For", "6.6.6.7", "CF-Connecting-IP", "6.6.6.8",
	"X-Forwarded", "for=6.6.6.9", "Forwarded-For", "6.6.6.10", "X-Envoy-External-Address", "6.6.6.11",
	"Remote-Addr", "6.6.6.12", "X-Original-URI", "/admin", "X-Url-Scheme", "https",
}

// TestForgedIdentityHeaders: client-identity headers a client sends never
// reach the app as it wrote them, on every path: the lean HTTP/1.1 loop,
// net/http's HTTP/1.1, HTTP/2 and a WebSocket upgrade. The app sees the
// gateway's X-Forwarded-For (the peer) and none of the forged fields; a
// header that merely looks alike (X-Real-IPs) still goes through.
func TestForgedIdentityHeaders(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(r.Header)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		b, _ := json.Marshal(h)
		c.Write(r.Context(), websocket.MessageText, b)
	})
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)
	check := func(t *testing.T, path string, seen http.Header) {
		t.Helper()
		for i := 0; i < len(forgedIdentity); i += 2 {
			k, v := forgedIdentity[i], forgedIdentity[i+1]
			for sk, sv := range seen {
				if strings.EqualFold(strings.ReplaceAll(sk, "_", "-"), strings.ReplaceAll(k, "_", "-")) && sk != "X-Forwarded-For" {
					t.Errorf("%s: the app got %s: %q (the client sent %s: %q)", path, sk, sv, k, v)
				}
			}
		}
		if got := seen["X-Forwarded-For"]; len(got) != 1 || got[0] != "127.0.0.1" {
			t.Errorf("%s: X-Forwarded-For %q, want the gateway's alone, 127.0.0.1", path, got)
		}
		if got := seen["X-Real-Ips"]; len(got) != 1 || got[0] != "kept" {
			t.Errorf("%s: X-Real-IPs %q, want it passed on", path, got)
		}
	}
	hdr := append(append([]string(nil), forgedIdentity...), "X-Real-IPs", "kept")
	for _, fe := range []struct {
		name        string
		netHTTPOnly bool
		h2          bool
	}{{"lean", false, false}, {"nethttp", true, false}, {"h2", false, true}} {
		t.Run(fe.name, func(t *testing.T) {
			cfg := testConfig()
			g, err := New(cfg, fakes(&fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}),
				Options{NetHTTPOnly: fe.netHTTPOnly, TLS: fe.h2}, testkit.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			s := NewServer(cfg, g, testkit.Logger(t))
			tr := &http.Transport{}
			if fe.h2 {
				s.TLSConfig = testkit.TLSConfig("h2", "http/1.1")
				tr = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
			}
			t.Cleanup(tr.CloseIdleConnections)
			srv := serve(t, s)
			tok := testkit.Mint(t, cfg, "abc", time.Minute)
			req := abcRequest("GET", srv.URL+"/", nil, tok)
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header[hdr[i]] = []string{hdr[i+1]} // as written: X_Real_IP is not canonicalized
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if fe.h2 && resp.ProtoMajor != 2 {
				t.Fatalf("got %s, want HTTP/2", resp.Proto)
			}
			var seen http.Header
			if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
				t.Fatal(err)
			}
			check(t, "GET /", seen)
			if fe.h2 {
				return // WebSockets go over HTTP/1.1
			}
			wsh := http.Header{"Authorization": {"Bearer " + tok}}
			for i := 0; i+1 < len(hdr); i += 2 {
				wsh[hdr[i]] = []string{hdr[i+1]}
			}
			ctx := t.Context()
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws",
				&websocket.DialOptions{Host: "sandbox-abc." + testDomain, HTTPHeader: wsh})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			_, msg, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seen = nil
			if err := json.Unmarshal(msg, &seen); err != nil {
				t.Fatal(err)
			}
			check(t, "upgrade /ws", seen)
		})
	}
}
