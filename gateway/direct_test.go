package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/outbound"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/internal/upstream"
	"github.com/previewgate/previewgate/internal/wire"
)

// TestDirectMatchesReverseProxy sends the same requests through the
// gateway's one upstream path and through httputil.ReverseProxy (the path
// it replaced, kept here as the reference: refProxy), on both front ends,
// and compares what the app sees and what the client gets back: the
// exchange must keep ReverseProxy's semantics (hop-by-hop headers,
// X-Forwarded-*, token stripping, Host, bodies and their framing,
// trailers).
func TestDirectMatchesReverseProxy(t *testing.T) {
	t.Parallel()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		if len(h["X-Request-Id"]) == 1 && h["X-Request-Id"][0] != "" {
			h["X-Request-Id"] = []string{"one"} // the gateway's own, different in each
		}
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
		body, _ := io.ReadAll(r.Body)
		json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "uri": r.RequestURI, "headers": h, "method": r.Method,
			"body": string(body), "length": r.ContentLength, "chunked": r.TransferEncoding, "trailer": r.Trailer})
		if r.URL.Path == "/trailer" {
			w.Header().Set("X-Sum", "42")
		}
	}))
	defer app.Close()
	cfg := testConfig()
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	ref := refProxy(t, cfg, app.Listener.Addr().String())
	run := func(srv *httptest.Server, method, path, body string, hdr ...string) (int, http.Header, string) {
		var rd io.Reader
		switch body {
		case "":
		case "chunked":
			rd = io.MultiReader(strings.NewReader("in "), strings.NewReader("pieces")) // unknown length
		default:
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, srv.URL+path, rd)
		req.Host = "sandbox-abc." + testDomain
		// refProxy takes the client's id; the gateway makes its own.
		hdr = append(hdr, "X-Request-Id", "client-sent")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		if body == "chunked" {
			req.Trailer = http.Header{"X-Checksum": nil}
			req.Header.Set("Te", "trailers")
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		h := resp.Header.Clone()
		h.Del("Date")
		if id := h["X-Request-Id"]; len(id) == 1 && id[0] != "" {
			h["X-Request-Id"] = []string{"one"} // the gateway's own, different in each
		}
		for k, v := range resp.Trailer {
			h["Trailer-"+k] = v
		}
		return resp.StatusCode, h, string(b)
	}
	cases := []struct {
		name, method, path, body string
		hdr                      []string
	}{
		{"bearer and hop-by-hop", "GET", "/a/b%20c?x=1&access_token=" + tok + "&y=2", "", []string{
			"Authorization", "Bearer " + tok, "Connection", "X-Hop", "X-Hop", "1", "Te", "trailers",
			"X-Forwarded-For", "6.6.6.6", "Forwarded", "for=6.6.6.6", "X-Custom", "kept",
			"Referer", "https://app.example/p?access_token=" + tok + "&q=1"}},
		{"cookie among others", "GET", "/", "", []string{
			"Cookie", "theme=dark; " + auth.DefaultCookieName + "=" + tok + "; lang=en", "Accept", "text/css"}},
		{"app bearer kept", "GET", "/", "", []string{
			"Cookie", auth.DefaultCookieName + "=" + tok, "Authorization", "Bearer app-own-token"}},
		{"head", "HEAD", "/", "", []string{"Authorization", "Bearer " + tok}},
		{"trailer", "GET", "/trailer", "", []string{"Authorization", "Bearer " + tok}},
		{"trailer, no content type", "GET", "/trailer-untyped", "", []string{"Authorization", "Bearer " + tok}},
		{"chunked stream", "GET", "/stream", "", []string{"Authorization", "Bearer " + tok}},
		{"no content type", "GET", "/no-type", "", []string{"Authorization", "Bearer " + tok}},
		{"not modified", "GET", "/not-modified", "", []string{"Authorization", "Bearer " + tok, "If-None-Match", `"v1"`}},
		{"content length", "GET", "/length", "", []string{"Authorization", "Bearer " + tok}},
		{"head content length", "HEAD", "/length", "", []string{"Authorization", "Bearer " + tok}},
		{"post with length", "POST", "/form?x=1", "a=1&b=2", []string{"Authorization", "Bearer " + tok,
			"Content-Type", "application/x-www-form-urlencoded"}},
		{"post chunked with trailer", "POST", "/up", "chunked", []string{"Authorization", "Bearer " + tok}},
		{"put empty", "PUT", "/empty", "", []string{"Authorization", "Bearer " + tok}},
		{"delete", "DELETE", "/thing", "", []string{"Authorization", "Bearer " + tok}},
		{"post expecting continue", "POST", "/wait", "payload", []string{"Authorization", "Bearer " + tok, "Expect", "100-continue"}},
	}
	for _, fe := range frontEnds {
		_, srv := startGatewayOpts(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, Options{NetHTTPOnly: fe.netHTTPOnly})
		for _, tc := range cases {
			t.Run(fe.name+"/"+tc.name, func(t *testing.T) {
				ds, dh, db := run(srv, tc.method, tc.path, tc.body, tc.hdr...)
				rs, rh, rb := run(ref, tc.method, tc.path, tc.body, tc.hdr...)
				if ds != rs || db != rb {
					t.Errorf("gateway %d %s\nreverse proxy %d %s", ds, db, rs, rb)
				}
				if !reflect.DeepEqual(dh, rh) {
					t.Errorf("response headers differ:\ngateway       %v\nreverse proxy %v", dh, rh)
				}
				// An answer the app left untyped stays so (no Content-Type
				// sniffed by the gateway's server).
				if ct, ok := dh["Content-Type"]; strings.Contains(tc.path, "untyped") || tc.path == "/no-type" {
					if ok || rh["Content-Type"] != nil {
						t.Errorf("untyped answer got Content-Type %q (gateway), %q (reverse proxy), want none", ct, rh["Content-Type"])
					}
				}
			})
		}
	}
}

// refProxy serves sandbox abc at addr through httputil.ReverseProxy as
// the gateway did before its one upstream path: the same outbound policy
// (local host mode, tokens stripped), the same response rules.
func refProxy(t *testing.T, cfg *config.Config, addr string) *httptest.Server {
	v, err := auth.NewVerifier(cfg.Auth, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := outbound.Host{Mode: outbound.Local, Preview: r.Host}
		w.Header()["X-Request-Id"] = r.Header["X-Request-Id"]
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme, pr.Out.URL.Host = "http", addr
				pfx, h, query, stripped := host.Head(pr.In, addr, v)
				pr.Out.Host, pr.Out.URL.RawQuery = pfx+h, query
				out := make(http.Header)
				outbound.Fields(pr.In, &stripped, false, wire.HeaderSink(out))
				pr.Out.Header = out
			},
			ModifyResponse: func(resp *http.Response) error {
				// ReverseProxy clears the client's headers after a 1xx it
				// forwards; the gateway puts its X-Request-Id back.
				var id []string
				if w.Header()["X-Request-Id"] == nil {
					id = r.Header["X-Request-Id"]
				}
				host.Response(resp.Header, addr, id)
				return nil
			},
			Transport: &http.Transport{DisableCompression: true},
		}
		rp.ServeHTTP(noSniff{w}, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// noSniff keeps an untyped answer untyped, as the gateway does.
type noSniff struct{ http.ResponseWriter }

func (w noSniff) WriteHeader(code int) {
	if code >= 200 {
		upstream.NoSniff(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w noSniff) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestStrippedHeadersPerRequest: with many requests at once, bodiless
// and with bodies, on both front ends, each request's app must still see
// exactly its own cookies and Referer, the token cookie gone.
func TestStrippedHeadersPerRequest(t *testing.T) {
	t.Parallel()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s|%s", r.Header.Get("Cookie"), r.Header.Get("Referer"), r.Header.Get("Authorization"))
	}))
	defer app.Close()
	cfg := testConfig()
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	for _, fe := range frontEnds {
		_, srv := startGatewayOpts(t, cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, Options{NetHTTPOnly: fe.netHTTPOnly})
		tr := &http.Transport{MaxIdleConnsPerHost: 8}
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				for j := range 25 {
					n := strconv.Itoa(i*100 + j)
					method, body := http.MethodGet, io.Reader(nil)
					if j%2 == 1 {
						method, body = http.MethodPost, strings.NewReader("b"+n)
					}
					req, _ := http.NewRequest(method, srv.URL+"/p", body)
					req.Host = "sandbox-abc." + testDomain
					req.Header.Set("Cookie", auth.DefaultCookieName+"="+tok+"; u="+n)
					req.Header.Set("Referer", "http://ref.example/"+n)
					resp, err := client.Do(req)
					if err != nil {
						errs <- err
						return
					}
					got, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if want := "u=" + n + "|http://ref.example/" + n + "|"; string(got) != want {
						errs <- fmt.Errorf("%s: the app saw %q, want %q", fe.name, got, want)
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
