package links

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
)

func TestLinkMintParseMatch(t *testing.T) {
	t.Parallel()
	exp := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	id, tok, digest, err := newToken(exp)
	if err != nil {
		t.Fatal(err)
	}
	gotID, gotExp, ok := parse(tok)
	if !ok || gotID != id || !gotExp.Equal(exp) {
		t.Fatalf("parse: got %q %v %v, want %q %v", gotID, gotExp, ok, id, exp)
	}
	if !matches(tok, digest) {
		t.Error("the token does not match its own digest")
	}
	if strings.Contains(digest, tok[len(tok)-20:]) {
		t.Error("the digest holds the secret")
	}
	for name, bad := range map[string]string{
		"another secret":  tok[:len(tok)-2] + "xx",
		"another expiry":  id + ".zzzzzz." + tok[strings.LastIndex(tok, ".")+1:],
		"empty":           "",
		"id only":         id,
		"long":            strings.Repeat("a", 500),
		"not hex id":      "lzzzzzzzzzzzz.tp4scv.abc",
		"negative expiry": id + ".-1.abc",
	} {
		if matches(bad, digest) {
			t.Errorf("%s: matches", name)
		}
		if _, _, ok := parse(bad); ok && name != "another secret" && name != "another expiry" {
			t.Errorf("%s: parse accepted %q", name, bad)
		}
	}
}

func TestPathWithin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path, prefix string
		want         bool
	}{
		{"/docs", "/docs", true}, {"/docs/", "/docs", true}, {"/docs/a", "/docs", true},
		{"/docs/a", "/docs/", true}, {"/docsx", "/docs", false}, {"/", "/docs", false},
		{"/anything", "/", true}, {"/x", "", true}, {"/Docs", "/docs", false},
	} {
		if got := PathWithin(c.path, c.prefix); got != c.want {
			t.Errorf("PathWithin(%q, %q): got %v, want %v", c.path, c.prefix, got, c.want)
		}
	}
}

// TestRequestWithin: no spelling of a dot segment or separator leaves the
// prefix (what the server behind the gateway would normalize it to).
func TestRequestWithin(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]bool{
		"/docs": true, "/docs/a/b": true, "/docs/a%20b": true, "/docs/..a": true, "/docs/.well": true,
		"/docs/../admin": false, "/docs/%2e%2e/admin": false, "/docs%2f..%2fadmin": false, "/docs%2fadmin": false,
		"/docs/..%5cadmin": false, "/docs/..;/admin": false, "/docs/.;/x": false, "/%64ocs/x": false, "/docs/..": false,
	} {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Fatal(err)
		}
		if got := RequestWithin(u, "/docs"); got != want {
			t.Errorf("RequestWithin(%q, /docs): got %v, want %v", target, got, want)
		}
	}
	if u, _ := url.ParseRequestURI("/my%20docs/x"); !RequestWithin(u, "/my docs") {
		t.Errorf("an escaped prefix: refused")
	}
}

// TestLinkStripAndExchange: the link's token leaves the URL by a 303 that
// sets a host-only cookie, and Strip removes the token from the query (any
// spelling) and the cookie (both names) while keeping the app's own.
func TestLinkStripAndExchange(t *testing.T) {
	t.Parallel()
	v, err := auth.NewVerifier(config.Auth{Audience: "previewgate", Keys: []config.Key{{KID: "k1", Alg: "HS256", Secret: "0123456789abcdef0123456789abcdef"}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r := httptest.NewRequest("GET", "https://sandbox-a.example/docs?a=1&previewgate_link=TOK&b=2", nil)
	tok, fromQuery, ok := Find(r, v)
	if !ok || !fromQuery || tok != "TOK" {
		t.Fatalf("Find: got %q %v %v", tok, fromQuery, ok)
	}
	w := httptest.NewRecorder()
	Exchange(w, r, v, tok, time.Now().Add(time.Minute))
	c := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/docs?a=1&b=2" || len(c) != 1 ||
		c[0].Name != "__Host-previewgate_link" || c[0].Domain != "" || !c[0].HttpOnly || !c[0].Secure {
		t.Fatalf("Exchange: %d %q %v", w.Code, w.Header().Get("Location"), c)
	}
	out := httptest.NewRequest("GET", "https://sandbox-a.example/docs?previewgate%5Flink=TOK&x=1", nil)
	out.Header.Set("Cookie", "app=1; __Host-previewgate_link=TOK; previewgate_link=TOK2")
	v.Strip(out)
	if out.URL.RawQuery != "x=1" || out.Header.Get("Cookie") != "app=1" {
		t.Errorf("Strip: query %q cookie %q, want x=1 and app=1", out.URL.RawQuery, out.Header.Get("Cookie"))
	}
	ws := httptest.NewRequest("GET", "https://sandbox-a.example/?previewgate_link=TOK", nil)
	ws.Header.Set("Upgrade", "websocket")
	ws.Header.Set("Connection", "Upgrade")
	if _, _, ok := Find(ws, v); ok {
		t.Error("a WebSocket upgrade's query link was taken (it cannot follow the exchange)")
	}
}

// FuzzParseLink: link tokens come from any client; parsing never panics,
// never accepts what it cannot read back, and bounds its work.
func FuzzParse(f *testing.F) {
	_, tok, _, _ := newToken(time.Now().Add(time.Hour))
	for _, s := range []string{tok, "", ".", "..", "l000000000000.1.x", "l000000000000.zzzzzzzzzzzzzzzzzz.x", strings.Repeat(".", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, exp, ok := parse(s)
		if !ok {
			return
		}
		if len(s) > maxToken || !strings.HasPrefix(s, id+".") || exp.Unix() <= 0 {
			t.Fatalf("accepted %q as %q %v", s, id, exp)
		}
		_ = matches(s, Digest(s))
		_ = PathWithin(s, id)
	})
}
