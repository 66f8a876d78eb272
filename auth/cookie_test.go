package auth

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestCookieNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		configured string
		tls        bool
		want       string
	}{
		{"", false, "previewgate_token"},
		{"", true, "__Host-previewgate_token"},
		{"pg", false, "pg"},
		{"pg", true, "__Host-pg"},
		{"__Host-pg", true, "__Host-pg"},
		{"__Host-pg", false, "pg"},
	}
	for _, tc := range tests {
		if _, got := cookieNames(tc.configured, tc.tls); got != tc.want {
			t.Errorf("cookieNames(%q, %v): got %q, want %q", tc.configured, tc.tls, got, tc.want)
		}
	}
}

func TestExchange(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Minute
	tok := mint(t, hsKey, MintOptions{Sandbox: "a", TTL: ttl})
	older := mint(t, hsKey, MintOptions{Sandbox: "a", Subject: "older", TTL: time.Minute})
	expired := mint(t, hsKey, MintOptions{Sandbox: "a", Now: t0.Add(-2 * time.Hour), TTL: time.Hour})
	expires := t0.Add(ttl).UTC().Format(http.TimeFormat)
	tests := []struct {
		name         string
		tls          bool
		target       string
		cookie       string // our cookie's value on the request, if any
		fetch        map[string]string
		wantSrc      Source // FromQuery unless set
		wantLocation string
		wantCookie   string // "": no Set-Cookie
	}{
		{
			name:         "top-level navigation",
			target:       "/app/page?a=1&access_token=" + tok + "&b=2&b=%20x",
			fetch:        map[string]string{"Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "cross-site"},
			wantLocation: "/app/page?a=1&b=2&b=%20x",
			wantCookie:   "previewgate_token=" + tok + "; Path=/; Expires=" + expires + "; Max-Age=600; HttpOnly; Secure; SameSite=Lax",
		},
		{
			name:         "cross-site iframe over TLS",
			tls:          true,
			target:       "/?access_token=" + tok,
			fetch:        map[string]string{"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Site": "cross-site"},
			wantLocation: "/",
			wantCookie:   "__Host-previewgate_token=" + tok + "; Path=/; Expires=" + expires + "; Max-Age=600; HttpOnly; Secure; SameSite=None; Partitioned",
		},
		{
			name:         "same-site iframe",
			target:       "/x?access_token=" + tok,
			fetch:        map[string]string{"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Site": "same-site"},
			wantLocation: "/x",
			wantCookie:   "previewgate_token=" + tok + "; Path=/; Expires=" + expires + "; Max-Age=600; HttpOnly; Secure; SameSite=Lax",
		},
		{
			name:         "no fetch metadata",
			target:       "/a%2Fb/?access%5Ftoken=" + tok + "&keep=1&access_token=" + tok,
			wantLocation: "/a%2Fb/?keep=1",
			wantCookie:   "previewgate_token=" + tok + "; Path=/; Expires=" + expires + "; Max-Age=600; HttpOnly; Secure; SameSite=Lax",
		},
		{
			name:         "path that looks like another host",
			target:       "//evil.example/x?access_token=" + tok,
			wantLocation: "/.//evil.example/x",
			wantCookie:   "previewgate_token=" + tok + "; Path=/; Expires=" + expires + "; Max-Age=600; HttpOnly; Secure; SameSite=Lax",
		},
		{
			name:         "fresh query token replaces an older cookie",
			target:       "/p?access_token=" + tok + "&z=1",
			cookie:       older,
			wantLocation: "/p?z=1",
			wantCookie:   "previewgate_token=" + tok + "; Path=/; Expires=" + expires + "; Max-Age=600; HttpOnly; Secure; SameSite=Lax",
		},
		{
			name:         "valid cookie, garbage query token",
			target:       "/p?b=2&access_token=garbage&a=1",
			cookie:       tok,
			wantSrc:      FromCookie,
			wantLocation: "/p?b=2&a=1",
		},
		{
			name:         "valid cookie, expired query token, cross-site iframe",
			tls:          true,
			target:       "/?access_token=" + expired,
			cookie:       tok,
			fetch:        map[string]string{"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Site": "cross-site"},
			wantSrc:      FromCookie,
			wantLocation: "/",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, _ := newVerifier(t, testAuth(hsKey), tc.tls)
			r := httptest.NewRequest(http.MethodGet, "http://sandbox-a.localhost", nil)
			r.URL, _ = url.ParseRequestURI(tc.target) // as the server parses it
			r.RequestURI = tc.target
			for k, val := range tc.fetch {
				r.Header.Set(k, val)
			}
			if tc.cookie != "" {
				r.Header.Set("Cookie", v.CookieName()+"="+tc.cookie)
			}
			wantSrc := tc.wantSrc
			if wantSrc == FromNone {
				wantSrc = FromQuery
			}
			res, err := v.Check(r, "a")
			if err != nil || res.Source != wantSrc || !res.Exchange {
				t.Fatalf("Check: got %v/%v/Exchange %v, want %v success with Exchange", res.Source, err, res.Exchange, wantSrc)
			}
			w := httptest.NewRecorder()
			v.Exchange(w, r, res)
			if w.Code != http.StatusSeeOther {
				t.Errorf("got status %d, want 303", w.Code)
			}
			h := w.Header()
			for k, want := range map[string]string{"Location": tc.wantLocation, "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
				if got := h.Get(k); got != want {
					t.Errorf("got %s %q, want %q", k, got, want)
				}
			}
			got := h.Values("Set-Cookie")
			switch {
			case tc.wantCookie == "" && len(got) != 0:
				t.Errorf("got Set-Cookie %q, want none", got)
			case tc.wantCookie != "" && (len(got) != 1 || got[0] != tc.wantCookie):
				t.Errorf("got Set-Cookie %q,\nwant %q", got, tc.wantCookie)
			}
			if strings.Contains(h.Get("Set-Cookie"), "Domain") {
				t.Errorf("cookie has a Domain attribute; want host-only")
			}
		})
	}
}

// TestExchangeRoundTrip runs the exchange over real HTTP: the query token
// turns into a cookie, and the cookie then authenticates the clean URL.
func TestExchangeRoundTrip(t *testing.T) {
	t.Parallel()
	v, _ := newVerifier(t, testAuth(hsKey), false)
	tok := mint(t, hsKey, MintOptions{Sandbox: "a"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := v.Check(r, "a")
		if err != nil {
			http.Error(w, Reason(err), Status(err))
			return
		}
		if res.Exchange {
			v.Exchange(w, r, res)
			return
		}
		v.Strip(r)
		io.WriteString(w, res.Source.String()+" "+r.URL.RawQuery+" "+r.Header.Get("Cookie"))
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := client.Get(srv.URL + "/page?z=9&access_token=" + tok + "&a=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("got %d, want 303", resp.StatusCode)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Value != tok {
		t.Fatalf("got cookies %v, want our token", cookies)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+resp.Header.Get("Location"), nil)
	req.AddCookie(&http.Cookie{Name: "app", Value: "1"})
	req.AddCookie(cookies[0])
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := string(body), "cookie z=9&a=1 app=1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}

	// The cookie authenticates, but a token in the URL still goes: a
	// redirect that leaves the cookie alone.
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/page?access_token=garbage&z=9", nil)
	req.AddCookie(cookies[0])
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/page?z=9" || len(resp.Cookies()) != 0 {
		t.Errorf("cookie and garbage query: got %d Location %q cookies %v, want 303 to /page?z=9 and no cookie",
			resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}

	resp, err = client.Get(srv.URL + "/page")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: got %d, want 401", resp.StatusCode)
	}
}

func TestStrip(t *testing.T) {
	t.Parallel()
	v, _ := newVerifier(t, testAuth(hsKey), false)
	ours := mint(t, hsKey, MintOptions{Sandbox: "a"})
	// Ours by audience even though signed by a key we do not have.
	oursByAud := signRaw(t, jwt.SigningMethodHS256, []byte("some other secret, still for previewgate"), nil, goodClaims())
	appTok := signRaw(t, jwt.SigningMethodHS256, []byte("the app's own secret, not ours at all"), nil, jwt.MapClaims{"aud": "app-api"})

	tests := []struct {
		name       string
		cookie     []string
		authz      []string
		query      string
		referer    string
		wantCookie []string
		wantAuthz  []string
		wantQuery  string
		wantRef    string
	}{
		{
			name:       "our cookie among others",
			cookie:     []string{"a=1; previewgate_token=" + ours + "; b=2"},
			wantCookie: []string{"a=1; b=2"},
		},
		{
			name:       "both spellings and other lines untouched",
			cookie:     []string{"previewgate_token=x", "x=y;z", "__Host-previewgate_token=y;  c=3"},
			wantCookie: []string{"x=y;z", "c=3"},
		},
		{
			name:       "similar names kept byte for byte",
			cookie:     []string{"my_previewgate_token=1;previewgate_tokenx=2"},
			wantCookie: []string{"my_previewgate_token=1;previewgate_tokenx=2"},
		},
		{
			name:   "only ours",
			cookie: []string{"previewgate_token=" + ours},
		},
		{
			name:  "our bearer",
			authz: []string{"Bearer " + ours},
		},
		{
			name:  "bearer for our audience",
			authz: []string{"bearer " + oursByAud},
		},
		{
			name:      "app's own bearer kept",
			authz:     []string{"Bearer " + appTok},
			wantAuthz: []string{"Bearer " + appTok},
		},
		{
			name:      "basic kept",
			authz:     []string{"Basic dXNlcjpwYXNz"},
			wantAuthz: []string{"Basic dXNlcjpwYXNz"},
		},
		{
			name:      "query",
			query:     "a=1&access_token=" + ours + "&b=%2F&access%5Ftoken=x",
			wantQuery: "a=1&b=%2F",
		},
		{
			name:    "referer",
			referer: "http://sandbox-a.localhost/p?access_token=" + ours + "&q=1",
			wantRef: "http://sandbox-a.localhost/p?q=1",
		},
		{
			name:    "referer without token kept",
			referer: "https://app.example.com/x?y=1",
			wantRef: "https://app.example.com/x?y=1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := httptest.NewRequest(http.MethodGet, "http://sandbox-a.localhost/p", nil)
			out.URL.RawQuery = tc.query
			if tc.cookie != nil {
				out.Header["Cookie"] = tc.cookie
			}
			if tc.authz != nil {
				out.Header["Authorization"] = tc.authz
			}
			if tc.referer != "" {
				out.Header.Set("Referer", tc.referer)
			}
			out.Header.Set("Accept", "*/*")
			before, beforeQuery := out.Header.Clone(), out.URL.RawQuery
			stripped, query := v.Stripped(out)
			if !reflect.DeepEqual(out.Header, before) || out.URL.RawQuery != beforeQuery {
				t.Errorf("Stripped changed the request: %q ?%s", out.Header, out.URL.RawQuery)
			}
			v.Strip(out) // Stripped applied: the cases below check both
			if query != out.URL.RawQuery {
				t.Errorf("Stripped: got query %q, Strip left %q", query, out.URL.RawQuery)
			}
			// Stripped edits exactly the token headers the request had
			// and Strip changes; the direct path sends the others as they
			// came.
			for _, k := range append(TokenHeaders[:], "Accept") {
				vv, edited := stripped.Get(k)
				switch {
				case edited && !slices.Contains(TokenHeaders[:], k):
					t.Errorf("Stripped edited %s, which is no token header", k)
				case edited && (!slices.Equal(vv, out.Header[k]) || (vv == nil) != (out.Header[k] == nil)):
					t.Errorf("Stripped: got %s %q, Strip left %q", k, vv, out.Header[k])
				case edited && slices.Equal(vv, before[k]) && (vv == nil) == (before[k] == nil):
					t.Errorf("Stripped edited %s without changing it", k)
				case !edited && !slices.Equal(before[k], out.Header[k]):
					t.Errorf("Stripped left out %s, which Strip changed from %q to %q", k, before[k], out.Header[k])
				}
			}
			if got := out.Header["Cookie"]; !slices.Equal(got, tc.wantCookie) {
				t.Errorf("got Cookie %q, want %q", got, tc.wantCookie)
			}
			if got := out.Header["Authorization"]; !slices.Equal(got, tc.wantAuthz) {
				t.Errorf("got Authorization %q, want %q", got, tc.wantAuthz)
			}
			if out.URL.RawQuery != tc.wantQuery {
				t.Errorf("got query %q, want %q", out.URL.RawQuery, tc.wantQuery)
			}
			if got := out.Header.Get("Referer"); got != tc.wantRef {
				t.Errorf("got Referer %q, want %q", got, tc.wantRef)
			}
		})
	}
}

// cookieNamesIn lists the names of the pairs in Cookie lines, as an
// upstream parser would see them.
func cookieNamesIn(lines []string) []string {
	var names []string
	for _, l := range lines {
		for part := range strings.SplitSeq(l, ";") {
			if k, _, ok := strings.Cut(part, "="); ok && strings.TrimSpace(k) != "" {
				names = append(names, strings.TrimSpace(k))
			}
		}
	}
	return names
}

// FuzzCookie checks cookie parsing and Strip on arbitrary Cookie lines: no
// panic, none of our cookies left, every other cookie kept in order, and a
// line without our cookie left byte for byte.
func FuzzCookie(f *testing.F) {
	v, err := NewVerifier(testAuth(hsKey), false)
	if err != nil {
		f.Fatal(err)
	}
	defer v.Close()
	f.Add("a=1; previewgate_token=abc; b=2", "x=y")
	f.Add(`previewgate_token="q"; __Host-previewgate_token=z;;; =;`, "previewgate_token")
	f.Add(" previewgate_token = v ;a", "")
	f.Add("\x00;\xff=previewgate_token", "previewgate_token=;previewgate_token=")
	f.Fuzz(func(t *testing.T, line1, line2 string) {
		lines := []string{line1, line2}
		_ = cookieValues(nil, lines, v.cookieName)
		r := &http.Request{Method: http.MethodGet, Host: "sandbox-a.localhost", URL: &url.URL{Path: "/"},
			Header: http.Header{"Cookie": slices.Clone(lines)}}
		if _, err := v.Check(r, "a"); err == nil {
			t.Fatalf("garbage cookie authenticated")
		} else if !errors.Is(err, ErrMissing) && !errors.Is(err, ErrInvalid) {
			t.Fatalf("unexpected error class %v", err)
		}
		v.Strip(r)
		got := r.Header["Cookie"]
		if vals := cookieValues(nil, got, v.cookieName); len(vals) != 0 {
			t.Fatalf("our cookie survived Strip: %q", got)
		}
		var want []string
		for _, n := range cookieNamesIn(lines) {
			if n != v.cookieBase && n != hostPrefix+v.cookieBase {
				want = append(want, n)
			}
		}
		if gotNames := cookieNamesIn(got); !slices.Equal(gotNames, want) {
			t.Fatalf("Strip(%q) = %q: names %q, want %q", lines, got, gotNames, want)
		}
		for i, l := range lines {
			if !slices.Contains(cookieNamesIn([]string{l}), v.cookieBase) && !strings.Contains(l, v.cookieBase) {
				if !slices.Contains(got, l) && l != "" {
					t.Fatalf("line %d %q without our cookie was changed: %q", i, l, got)
				}
			}
		}
	})
}

// TokenHeaders are the headers Strip may change.
var TokenHeaders = [...]string{"Cookie", "Authorization", "Referer"}
