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
	}{
		{"header beats cookie and query", req{authz: "Bearer " + hdr, cookies: []string{ck}, query: "access_token=" + qry}, "header", FromHeader, nil},
		{"cookie beats query", req{cookies: []string{ck}, query: "access_token=" + qry}, "cookie", FromCookie, nil},
		{"query alone", req{query: "x=1&access_token=" + qry}, "query", FromQuery, nil},
		{"query on HEAD", req{method: http.MethodHead, query: "access_token=" + qry}, "query", FromQuery, nil},
		{"lowercase bearer scheme", req{authz: "bearer  " + hdr}, "header", FromHeader, nil},
		{"query ignored on POST", req{method: http.MethodPost, query: "access_token=" + qry}, "", 0, ErrMissing},
		{"query ignored on websocket", req{upgrade: true, query: "access_token=" + qry}, "", 0, ErrMissing},
		{"nothing", req{query: "access_token="}, "", 0, ErrMissing},
		{"basic auth is not a token", req{authz: "Basic dXNlcjpwYXNz"}, "", 0, ErrMissing},
		{"basic auth then cookie", req{authz: "Basic dXNlcjpwYXNz", cookies: []string{ck}}, "cookie", FromCookie, nil},
		{"app's own bearer then cookie", req{authz: "Bearer " + appTok, cookies: []string{ck}}, "cookie", FromCookie, nil},
		{"stale cookie then fresh query", req{cookies: []string{expired}, query: "access_token=" + qry}, "query", FromQuery, nil},
		{"two cookies, first stale", req{cookies: []string{expired, ck}}, "cookie", FromCookie, nil},
		{"expired beats garbage", req{authz: "Bearer garbage", cookies: []string{expired}}, "", 0, ErrExpired},
		{"wrong sandbox beats expired", req{cookies: []string{expired, otherSbx}}, "", 0, ErrForbidden},
		{"invalid header alone", req{authz: "Bearer garbage"}, "", 0, ErrInvalid},
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
	if !isWebSocket(r) {
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
