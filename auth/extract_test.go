package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestExtractionOrder(t *testing.T) {
	t.Parallel()
	v, _ := newVerifier(t, testAuth(hsKey), false)
	tok := func(sub string) string { return mint(t, hsKey, MintOptions{Sandbox: "a", Subject: sub}) }
	hdr, ck, qry := tok("header"), tok("cookie"), tok("query")
	expired := mint(t, hsKey, MintOptions{Sandbox: "a", Subject: "old", Now: t0.Add(-2 * time.Hour), TTL: time.Hour})
	otherSbx := mint(t, hsKey, MintOptions{Sandbox: "b"})
	// An app's own bearer token (not for us) must not lock the user out.
	appTok := signRaw(t, jwt.SigningMethodHS256, []byte("the app's own secret, not ours at all"), nil, jwt.MapClaims{"aud": "app-api"})

	type req struct {
		method, authz, query string
		cookies              []string
		upgrade              bool
	}
	tests := []struct {
		name    string
		req     req
		wantSub string
		wantSrc Source
		wantErr error
		wantExc bool // Result.Exchange: the caller must redirect the token out of the URL
	}{
		{"header beats cookie and query", req{authz: "Bearer " + hdr, cookies: []string{ck}, query: "access_token=" + qry}, "header", FromHeader, nil, false},
		{"fresh query beats valid cookie", req{cookies: []string{ck}, query: "access_token=" + qry}, "query", FromQuery, nil, true},
		{"valid cookie, garbage query", req{cookies: []string{ck}, query: "a=1&access_token=garbage"}, "cookie", FromCookie, nil, true},
		{"valid cookie, expired query", req{cookies: []string{ck}, query: "access_token=" + expired}, "cookie", FromCookie, nil, true},
		{"valid cookie, query for another sandbox", req{cookies: []string{ck}, query: "access_token=" + otherSbx}, "cookie", FromCookie, nil, true},
		{"valid cookie, escaped query key", req{cookies: []string{ck}, query: "access%5Ftoken=garbage"}, "cookie", FromCookie, nil, true},
		{"valid cookie, empty query token", req{cookies: []string{ck}, query: "access_token="}, "cookie", FromCookie, nil, false},
		{"valid cookie, no query token", req{cookies: []string{ck}, query: "access=1&token=2&a%20b=c"}, "cookie", FromCookie, nil, false},
		{"valid cookie, query on POST", req{method: http.MethodPost, cookies: []string{ck}, query: "access_token=" + qry}, "cookie", FromCookie, nil, false},
		{"valid cookie, query on websocket", req{upgrade: true, cookies: []string{ck}, query: "access_token=" + qry}, "cookie", FromCookie, nil, false},
		{"header, query in URL", req{authz: "Bearer " + hdr, query: "access_token=garbage"}, "header", FromHeader, nil, false},
		{"query alone", req{query: "x=1&access_token=" + qry}, "query", FromQuery, nil, true},
		{"query on HEAD", req{method: http.MethodHead, query: "access_token=" + qry}, "query", FromQuery, nil, true},
		{"lowercase bearer scheme", req{authz: "bearer  " + hdr}, "header", FromHeader, nil, false},
		{"query ignored on POST", req{method: http.MethodPost, query: "access_token=" + qry}, "", 0, ErrMissing, false},
		{"query ignored on websocket", req{upgrade: true, query: "access_token=" + qry}, "", 0, ErrMissing, false},
		{"nothing", req{query: "access_token="}, "", 0, ErrMissing, false},
		{"garbage query alone", req{query: "access_token=garbage"}, "", 0, ErrInvalid, false},
		{"basic auth is not a token", req{authz: "Basic dXNlcjpwYXNz"}, "", 0, ErrMissing, false},
		{"basic auth then cookie", req{authz: "Basic dXNlcjpwYXNz", cookies: []string{ck}}, "cookie", FromCookie, nil, false},
		{"app's own bearer then cookie", req{authz: "Bearer " + appTok, cookies: []string{ck}}, "cookie", FromCookie, nil, false},
		{"app's own bearer, cookie and query", req{authz: "Bearer " + appTok, cookies: []string{ck}, query: "access_token=" + qry}, "query", FromQuery, nil, true},
		{"stale cookie then fresh query", req{cookies: []string{expired}, query: "access_token=" + qry}, "query", FromQuery, nil, true},
		{"two cookies, first stale", req{cookies: []string{expired, ck}}, "cookie", FromCookie, nil, false},
		{"expired beats garbage", req{authz: "Bearer garbage", cookies: []string{expired}}, "", 0, ErrExpired, false},
		{"wrong sandbox beats expired", req{cookies: []string{expired, otherSbx}}, "", 0, ErrForbidden, false},
		{"invalid header alone", req{authz: "Bearer garbage"}, "", 0, ErrInvalid, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := tc.req.method
			if m == "" {
				m = http.MethodGet
			}
			r := httptest.NewRequest(m, "http://sandbox-a.localhost/p?"+tc.req.query, nil)
			if tc.req.authz != "" {
				r.Header.Set("Authorization", tc.req.authz)
			}
			for _, c := range tc.req.cookies {
				r.Header.Add("Cookie", "other=1; "+v.CookieName()+"="+c)
			}
			if tc.req.upgrade {
				r.Header.Set("Connection", "Upgrade")
				r.Header.Set("Upgrade", "websocket")
				r.Header.Set("Origin", "http://sandbox-a.localhost")
			}
			res, err := v.Check(r, "a")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want success", err)
			}
			if res.Source != tc.wantSrc || res.Claims.Subject != tc.wantSub {
				t.Errorf("got %v/%s, want %v/%s", res.Source, res.Claims.Subject, tc.wantSrc, tc.wantSub)
			}
			if res.Exchange != tc.wantExc {
				t.Errorf("got Exchange %v, want %v", res.Exchange, tc.wantExc)
			}
		})
	}
}

func TestQueryToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, query, want string
		ok                bool
	}{
		{"alone", "access_token=t", "t", true},
		{"among others", "a=1&access_token=t&b=2", "t", true},
		{"escaped key", "access%5Ftoken=t", "t", true},
		{"escaped first letter", "x=1&%61ccess_token=t", "t", true},
		{"fully escaped", "%61%63%63%65%73%73%5F%74%6F%6B%65%6E=t", "t", true},
		{"escaped, too short", "a%5Fb=t", "", false},
		{"escaped value", "access_token=a%2Eb", "a.b", true},
		{"first non-empty", "access_token=&access_token=t", "t", true},
		{"empty", "access_token=", "", false},
		{"no query", "", "", false},
		{"name as a value", "x=access_token", "", false},
		{"longer name", "access_tokens=t", "", false},
		{"plus is a space", "access+token=t", "", false},
		{"other escapes", "a%20b=c&d=%2F", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := queryToken(tc.query)
			if got != tc.want || ok != tc.ok {
				t.Errorf("queryToken(%q): got %q/%v, want %q/%v", tc.query, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestCheckCachedNoAllocs: the hot path (a cookie or header seen before, no
// token in the URL) allocates nothing, query parameters or not.
func TestCheckCachedNoAllocs(t *testing.T) {
	v, _ := newVerifier(t, testAuth(hsKey), false)
	tok := mint(t, hsKey, MintOptions{Sandbox: "a"})
	tests := []struct {
		name   string
		target string
		header string
		value  string
	}{
		{"cookie", "/app.js", "Cookie", "a=1; " + v.CookieName() + "=" + tok},
		{"cookie with query", "/app.js?v=3&t=a%20b", "Cookie", v.CookieName() + "=" + tok},
		{"header with query", "/app.js?v=3", "Authorization", "Bearer " + tok},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://sandbox-a.localhost"+tc.target, nil)
			r.Header.Set(tc.header, tc.value)
			if _, err := v.Check(r, "a"); err != nil {
				t.Fatal(err)
			}
			if n := testing.AllocsPerRun(100, func() { v.Check(r, "a") }); n != 0 {
				t.Errorf("got %v allocs per Check, want 0", n)
			}
		})
	}
}

func TestCookieValues(t *testing.T) {
	t.Parallel()
	const n = "previewgate_token"
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"plain", []string{"previewgate_token=abc"}, []string{"abc"}},
		{"among others", []string{"a=1; previewgate_token=abc; b=2"}, []string{"abc"}},
		{"no spaces", []string{"a=1;previewgate_token=abc;b=2"}, []string{"abc"}},
		{"quoted", []string{`previewgate_token="abc"`}, []string{"abc"}},
		{"two lines", []string{"previewgate_token=x", "a=1; previewgate_token=y"}, []string{"x", "y"}},
		{"prefix is another cookie", []string{"__Host-previewgate_token=abc; xpreviewgate_token=d"}, nil},
		{"empty value", []string{"previewgate_token="}, nil},
		{"no equals", []string{"previewgate_token"}, nil},
		{"capped", []string{strings.Repeat("previewgate_token=v;", 10)}, []string{"v", "v", "v", "v"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := cookieValues(nil, tc.lines, n)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWebSocketOrigin(t *testing.T) {
	t.Parallel()
	cfg := testAuth(hsKey)
	cfg.AllowedOrigins = []string{"https://App.example.com/"}
	plain, _ := newVerifier(t, cfg, false)
	tlsV, _ := newVerifier(t, cfg, true)
	tok := mint(t, hsKey, MintOptions{Sandbox: "a"})

	tests := []struct {
		name    string
		v       *Verifier
		host    string
		origins []string // nil: no Origin header
		header  bool     // authenticate by Authorization instead of cookie
		upgrade string
		wantErr bool
	}{
		{"own origin", plain, "sandbox-a.localhost:8080", []string{"http://sandbox-a.localhost:8080"}, false, "websocket", false},
		{"own origin case-insensitive", plain, "Sandbox-A.localhost:8080", []string{"http://sandbox-a.localhost:8080"}, false, "WebSocket", false},
		{"own origin https behind TLS terminator", plain, "sandbox-a.localhost", []string{"https://sandbox-a.localhost"}, false, "websocket", false},
		{"allowed origin", plain, "sandbox-a.localhost", []string{"https://app.example.com"}, false, "websocket", false},
		{"foreign origin", plain, "sandbox-a.localhost", []string{"https://evil.example"}, false, "websocket", true},
		{"sibling sandbox origin", plain, "sandbox-a.localhost", []string{"http://sandbox-b.localhost"}, false, "websocket", true},
		{"other port", plain, "sandbox-a.localhost:8080", []string{"http://sandbox-a.localhost:9999"}, false, "websocket", true},
		{"no origin", plain, "sandbox-a.localhost", nil, false, "websocket", true},
		{"null origin", plain, "sandbox-a.localhost", []string{"null"}, false, "websocket", true},
		{"two origins", plain, "sandbox-a.localhost", []string{"http://sandbox-a.localhost", "http://sandbox-a.localhost"}, false, "websocket", true},
		{"upgrade token in a list", plain, "sandbox-a.localhost", []string{"https://evil.example"}, false, "foo, websocket", true},
		{"tls own origin", tlsV, "sandbox-a.example.com", []string{"https://sandbox-a.example.com"}, false, "websocket", false},
		{"tls own origin default port", tlsV, "sandbox-a.example.com:443", []string{"https://sandbox-a.example.com"}, false, "websocket", false},
		{"tls http origin", tlsV, "sandbox-a.example.com", []string{"http://sandbox-a.example.com"}, false, "websocket", true},
		{"header auth needs no origin", plain, "sandbox-a.localhost", []string{"https://evil.example"}, true, "websocket", false},
		{"plain GET with cookie needs no origin", plain, "sandbox-a.localhost", []string{"https://evil.example"}, false, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/hmr", nil)
			r.Host = tc.host
			if tc.upgrade != "" {
				r.Header.Set("Connection", "Upgrade")
				r.Header.Set("Upgrade", tc.upgrade)
			}
			for _, o := range tc.origins {
				r.Header.Add("Origin", o)
			}
			if tc.header {
				r.Header.Set("Authorization", "Bearer "+tok)
			} else {
				r.Header.Set("Cookie", tc.v.CookieName()+"="+tok)
			}
			_, err := tc.v.Check(r, "a")
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			if !errors.Is(err, ErrOrigin) || !errors.Is(err, ErrForbidden) || Status(err) != http.StatusForbidden {
				t.Fatalf("got %v (status %d), want ErrOrigin and ErrForbidden (403)", err, Status(err))
			}
			if Reason(err) != "origin not allowed" {
				t.Errorf("got reason %q, want %q", Reason(err), "origin not allowed")
			}
		})
	}
}

func TestExtendedConnectIsUpgrade(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodConnect, "/", nil)
	r.Header.Set(":protocol", "websocket")
	if !IsWebSocket(r) {
		t.Fatalf("got false, want extended CONNECT websocket to be an upgrade")
	}
}

func TestErrorReasons(t *testing.T) {
	t.Parallel()
	v, _ := newVerifier(t, testAuth(hsKey), false)
	tests := []struct {
		name, tok, want string
	}{
		{"missing", "", "missing"},
		{"invalid", "garbage", "invalid"},
		{"expired", mint(t, hsKey, MintOptions{Sandbox: "a", Now: t0.Add(-time.Hour), TTL: time.Minute}), "expired"},
		{"wrong sandbox", mint(t, hsKey, MintOptions{Sandbox: "b"}), "wrong sandbox"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tc.tok != "" {
				r.Header.Set("Authorization", "Bearer "+tc.tok)
			}
			_, err := v.Check(r, "a")
			if got := Reason(err); got != tc.want {
				t.Errorf("got %q, want %q (err %v)", got, tc.want, err)
			}
		})
	}
}

// FuzzExtract feeds arbitrary header, cookie and query values through the
// whole Check path and the query helpers. Nothing may panic, nothing
// garbage may authenticate, and a cleaned query never still holds a token.
func FuzzExtract(f *testing.F) {
	v, err := NewVerifier(testAuth(hsKey), false)
	if err != nil {
		f.Fatal(err)
	}
	defer v.Close()
	good := mint(f, hsKey, MintOptions{Sandbox: "a", Now: time.Now()})
	f.Add("Bearer "+good, "previewgate_token="+good, "access_token="+good, "/", false)
	f.Add("bearer", "previewgate_token", "access_token", "//evil.example/", true)
	f.Add("Bearer \t x", `previewgate_token="x"; a=b;;`, "a=1&access%5Ftoken=x&b=%zz", "/\\evil", false)
	f.Add("", "", "access_token=%", "", true)
	f.Fuzz(func(t *testing.T, authz, cookie, query, path string, upgrade bool) {
		r := &http.Request{Method: http.MethodGet, Host: "sandbox-a.localhost", Header: http.Header{},
			URL: &url.URL{Path: path, RawQuery: query}}
		if authz != "" {
			r.Header["Authorization"] = []string{authz}
		}
		if cookie != "" {
			r.Header["Cookie"] = []string{cookie}
		}
		if upgrade {
			r.Header["Upgrade"] = []string{"websocket"}
			r.Header["Origin"] = []string{authz}
		}
		res, err := v.Check(r, "a")
		if err == nil && !strings.Contains(authz+cookie+query, res.Raw) {
			t.Fatalf("authenticated with a token that is not in the request")
		}
		if err != nil && Status(err) != 401 && Status(err) != 403 {
			t.Fatalf("status %d", Status(err))
		}
		if q := removeAccessToken(query); strings.Contains(q, "&&") && !strings.Contains(query, "&&") {
			t.Fatalf("removeAccessToken(%q) = %q introduced an empty pair", query, q)
		}
		if _, ok := queryToken(removeAccessToken(query)); ok {
			t.Fatalf("access_token survives removal in %q", query)
		}
		loc := redirectTarget(r.URL)
		if !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
			t.Fatalf("redirect target %q could leave the host", loc)
		}
		if u, err := url.Parse(loc); err == nil && u.Host != "" {
			t.Fatalf("redirect target %q names a host", loc)
		}
	})
}
