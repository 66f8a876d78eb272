package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestDirectMatchesReverseProxy sends the same requests through the direct
// path and through httputil.ReverseProxy and compares what the app sees
// and what the client gets back: the shortcut must keep ReverseProxy's
// semantics (hop-by-hop headers, X-Forwarded-*, token stripping, Host).
func TestDirectMatchesReverseProxy(t *testing.T) {
	t.Parallel()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		w.Header().Set("Connection", "X-Drop-Me")
		w.Header().Set("X-Drop-Me", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-App", "yes")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		switch r.URL.Path {
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
		case "/stream": // chunked, flushed piece by piece
			w.Header().Set("Content-Type", "text/plain")
			for i := range 3 {
				fmt.Fprintf(w, "part %d\n", i)
				w.(http.Flusher).Flush()
			}
			return
		case "/trailer-untyped": // nothing for the gateway to sniff from either
			w.Header()["Content-Type"] = nil
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "<html>untyped</html>")
			w.Header().Set("X-Sum", "42")
			return
		case "/no-type":
			w.Header()["Content-Type"] = nil // no sniffing either
			io.WriteString(w, "<html>untyped</html>")
			return
		case "/not-modified":
			w.Header().Set("Etag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
			return
		case "/length":
			w.Header().Set("Content-Length", "11")
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "exactly 11!")
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "uri": r.RequestURI, "headers": h, "method": r.Method})
		if r.URL.Path == "/trailer" {
			w.Header().Set("X-Sum", "42")
		}
	}))
	defer app.Close()
	cfg := testConfig()
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	run := func(noDirect bool, method, path string, hdr ...string) (int, http.Header, string) {
		g, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}})
		g.proxy.noDirect = noDirect
		hdr = append(hdr, "X-Request-Id", "same-in-both") // else ids differ per gateway
		resp := testkit.Request(t, srv, method, "sandbox-abc."+testDomain, path, "", hdr...)
		body, _ := io.ReadAll(resp.Body)
		h := resp.Header.Clone()
		for _, k := range []string{"Date"} {
			h.Del(k)
		}
		for k, v := range resp.Trailer {
			h["Trailer-"+k] = v
		}
		return resp.StatusCode, h, string(body)
	}
	cases := []struct {
		name, method, path string
		hdr                []string
	}{
		{"bearer and hop-by-hop", "GET", "/a/b%20c?x=1&access_token=" + tok + "&y=2", []string{
			"Authorization", "Bearer " + tok, "Connection", "X-Hop", "X-Hop", "1", "Te", "trailers",
			"X-Forwarded-For", "6.6.6.6", "Forwarded", "for=6.6.6.6", "X-Custom", "kept",
			"Referer", "https://app.example/p?access_token=" + tok + "&q=1"}},
		{"cookie among others", "GET", "/", []string{
			"Cookie", "theme=dark; " + auth.DefaultCookieName + "=" + tok + "; lang=en", "Accept", "text/css"}},
		{"app bearer kept", "GET", "/", []string{
			"Cookie", auth.DefaultCookieName + "=" + tok, "Authorization", "Bearer app-own-token"}},
		{"head", "HEAD", "/", []string{"Authorization", "Bearer " + tok}},
		{"trailer", "GET", "/trailer", []string{"Authorization", "Bearer " + tok}},
		{"trailer, no content type", "GET", "/trailer-untyped", []string{"Authorization", "Bearer " + tok}},
		{"chunked stream", "GET", "/stream", []string{"Authorization", "Bearer " + tok}},
		{"no content type", "GET", "/no-type", []string{"Authorization", "Bearer " + tok}},
		{"not modified", "GET", "/not-modified", []string{"Authorization", "Bearer " + tok, "If-None-Match", `"v1"`}},
		{"content length", "GET", "/length", []string{"Authorization", "Bearer " + tok}},
		{"head content length", "HEAD", "/length", []string{"Authorization", "Bearer " + tok}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds, dh, db := run(false, tc.method, tc.path, tc.hdr...)
			rs, rh, rb := run(true, tc.method, tc.path, tc.hdr...)
			if ds != rs || db != rb {
				t.Errorf("direct %d %s\nreverse proxy %d %s", ds, db, rs, rb)
			}
			if !reflect.DeepEqual(dh, rh) {
				t.Errorf("response headers differ:\ndirect        %v\nreverse proxy %v", dh, rh)
			}
			// An answer the app left untyped stays so on both paths (no
			// Content-Type sniffed by the gateway's server: ReverseProxy's
			// own was sniffed or not by a race between its first flush and
			// the body).
			if ct, ok := dh["Content-Type"]; strings.Contains(tc.path, "untyped") || tc.path == "/no-type" {
				if ok || rh["Content-Type"] != nil {
					t.Errorf("untyped answer got Content-Type %q (direct), %q (reverse proxy), want none", ct, rh["Content-Type"])
				}
			}
		})
	}
}

// TestStrippedHeadersPerRequest: the token-stripped header maps are
// recycled (strippedPool); with many requests at once, on the direct path
// and on ReverseProxy's, each request's app must still see exactly its own
// cookies and Referer, the token cookie gone.
func TestStrippedHeadersPerRequest(t *testing.T) {
	t.Parallel()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s|%s", r.Header.Get("Cookie"), r.Header.Get("Referer"), r.Header.Get("Authorization"))
	}))
	defer app.Close()
	cfg := testConfig()
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	for _, noDirect := range []bool{false, true} {
		g, srv := startGateway(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}})
		g.proxy.noDirect = noDirect
		tr := &http.Transport{MaxIdleConnsPerHost: 8}
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				for j := range 25 {
					n := strconv.Itoa(i*100 + j)
					req, _ := http.NewRequest(http.MethodGet, srv.URL+"/p", nil)
					req.Host = "sandbox-abc." + testDomain
					req.Header.Set("Cookie", auth.DefaultCookieName+"="+tok+"; u="+n)
					req.Header.Set("Referer", "http://ref.example/"+n)
					resp, err := client.Do(req)
					if err != nil {
						errs <- err
						return
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if want := "u=" + n + "|http://ref.example/" + n + "|"; string(body) != want {
						errs <- fmt.Errorf("noDirect=%v: the app saw %q, want %q", noDirect, body, want)
						return
					}
				}
			})
		}
		wg.Wait()
		tr.CloseIdleConnections()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}
