package outbound

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/internal/wire"
)

// fakeTokens strips Authorization and the query, and recognizes one
// Origin as the preview's own.
type fakeTokens struct{ own string }

func (f fakeTokens) Stripped(r *http.Request) (e wire.Edits, query string) {
	e.Set("Authorization", nil)
	return e, ""
}

func (f fakeTokens) OwnOrigin(r *http.Request) bool { return r.Header.Get("Origin") == f.own }

const own = "https://sandbox-a.example.com"

func request(upgrade bool, origin string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://sandbox-a.example.com/p?access_token=x", nil)
	r.Header.Set("Origin", origin)
	if upgrade {
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Connection", "Upgrade")
	}
	return r
}

// TestHeadPerMode: each mode's Host, and the Origin the local mode
// changes only on an upgrade from the preview's own origin.
func TestHeadPerMode(t *testing.T) {
	const addr = "10.0.0.7:3000"
	tok := fakeTokens{own: own}
	for _, c := range []struct {
		name         string
		mode         Mode
		upgrade      bool
		origin       string
		host, wantOr string // wantOr "": Origin not in stripped
	}{
		{"local plain", Local, false, own, "localhost:3000", ""},
		{"local upgrade own origin", Local, true, own, "localhost:3000", "http://localhost:3000"},
		{"local upgrade other origin", Local, true, "https://evil.example", "localhost:3000", ""},
		{"preserve", Preserve, true, own, "sandbox-a.example.com", ""},
		{"rewrite", Rewrite, true, own, addr, ""},
		{"upstream", Upstream, false, own, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			pfx, host, query, stripped := Host{Mode: c.mode, Preview: "sandbox-a.example.com"}.Head(request(c.upgrade, c.origin), addr, tok)
			if pfx+host != c.host || query != "" {
				t.Errorf("Host %q, query %q; want %q and the stripped query", pfx+host, query, c.host)
			}
			if got, _ := stripped.Get("Origin"); c.wantOr == "" && got != nil || c.wantOr != "" && !slices.Equal(got, []string{c.wantOr}) {
				t.Errorf("Origin %q, want %q", got, c.wantOr)
			}
		})
	}
}

// TestFields: the one set of rules for every path.
func TestFields(t *testing.T) {
	r := request(false, own)
	r.RemoteAddr = "192.0.2.9:5555"
	r.Host = "sandbox-a.example.com"
	r.Header.Set("Connection", "X-Drop, X-Request-Id")
	r.Header.Set("X-Drop", "1")
	r.Header.Set("Keep-Alive", "timeout=5")
	r.Header.Set("Te", "trailers, deflate")
	r.Header.Set("X-Forwarded-For", "6.6.6.6")
	r.Header.Set("Forwarded", "for=6.6.6.6")
	r.Header.Set("X-Forwarded-Proto", "gopher")
	r.Header.Set("X-Forwarded-Port", "1")
	r.Header.Set("X-Real-IP", "6.6.6.6")
	r.Header["X_real_ip"] = []string{"6.6.6.6"}
	r.Header.Set("True-Client-IP", "6.6.6.6")
	r.Header.Set("X-Original-URL", "/admin")
	r.Header.Set("Via", "1.1 evil")
	r.Header.Set("X-Request-Id", "req-1")
	r.Header.Set("Authorization", "Bearer secret")
	r.Header.Set("Accept", "text/html")
	r.Header["Host"] = []string{"other.example"} // an HTTP/2 "host" field beside :authority
	for _, tls := range []bool{false, true} {
		h := http.Header{}
		_, _, _, stripped := Host{Mode: Local}.Head(r, "10.0.0.7:3000", fakeTokens{})
		Fields(r, &stripped, tls, wire.HeaderSink(h))
		proto := map[bool]string{false: "http", true: "https"}[tls]
		want := http.Header{
			"Accept":            {"text/html"},
			"Origin":            {own},
			"Te":                {"trailers"},
			"X-Request-Id":      {"req-1"},
			"X-Forwarded-For":   {"192.0.2.9"},
			"X-Forwarded-Host":  {"sandbox-a.example.com"},
			"X-Forwarded-Proto": {proto},
		}
		if len(h) != len(want) {
			t.Errorf("tls=%v: fields %v, want %v", tls, h, want)
		}
		for k, v := range want {
			if !slices.Equal(h[k], v) {
				t.Errorf("tls=%v: %s = %q, want %q", tls, k, h[k], v)
			}
		}
	}
}

// TestMapLocation: a redirect to the local identity goes back to the
// preview, scheme-relative; nothing else is touched.
func TestMapLocation(t *testing.T) {
	const addr = "10.0.0.7:3000"
	local := Host{Mode: Local, Preview: "Sandbox-A.example.com"}
	for _, c := range []struct {
		h    Host
		loc  []string
		want []string
	}{
		{local, []string{"http://localhost:3000/next?x=1"}, []string{"//sandbox-a.example.com/next?x=1"}},
		{local, []string{"HTTPS://LOCALHOST:3000"}, []string{"//sandbox-a.example.com"}},
		{local, []string{"//localhost:3000#top"}, []string{"//sandbox-a.example.com#top"}},
		{local, []string{"http://localhost:30001/"}, []string{"http://localhost:30001/"}},
		{local, []string{"http://localhost:3000.evil.example/"}, []string{"http://localhost:3000.evil.example/"}},
		{local, []string{"/relative"}, []string{"/relative"}},
		{local, []string{"http://localhost:3000/a", "http://localhost:3000/b"}, []string{"http://localhost:3000/a", "http://localhost:3000/b"}},
		{Host{Mode: Preserve, Preview: "sandbox-a.example.com"}, []string{"http://localhost:3000/"}, []string{"http://localhost:3000/"}},
		{Host{Mode: Rewrite}, []string{"http://localhost:3000/"}, []string{"http://localhost:3000/"}},
	} {
		h := http.Header{"Location": c.loc}
		c.h.MapLocation(h, addr)
		if !slices.Equal(h["Location"], c.want) {
			t.Errorf("mode %d: %q became %q, want %q", c.h.Mode, c.loc, h["Location"], c.want)
		}
	}
}

// TestResponse: a sandbox's answer reaches the client cut to its own
// host: Set-Cookie without Domain, Clear-Site-Data without "cookies" (or
// "*"), the gateway's X-Request-Id; a fixed upstream keeps its cookies.
func TestResponse(t *testing.T) {
	for _, tt := range []struct {
		name       string
		mode       Mode
		cookies    []string
		clear      []string // nil: no Clear-Site-Data
		id         []string
		wantCookie []string
		wantClear  string // "": none
		wantID     []string
	}{
		{"domain dropped", Preserve,
			[]string{"a=1; Domain=preview.test; Path=/", "b=2; path=/; DOMAIN=.preview.test; Secure", "domain=3; Path=/"},
			nil, []string{"gw"},
			[]string{"a=1; Path=/", "b=2; path=/; Secure", "domain=3; Path=/"}, "", []string{"gw"}},
		{"cookies cleared nowhere else", Local, nil,
			[]string{`"cache", "cookies"`, `cookies, "storage"`}, nil,
			nil, `"cache", "storage"`, nil},
		{"wildcard kept to the origin", Rewrite, nil, []string{`"*"`}, nil,
			nil, originDirectives, nil},
		{"only cookies", Preserve, nil, []string{`"COOKIES"`}, nil, nil, "", nil},
		{"fixed upstream", Upstream, []string{"a=1; Domain=example.test"}, []string{`"cookies"`}, []string{"gw"},
			[]string{"a=1; Domain=example.test"}, `"cookies"`, []string{"gw"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"X-Request-Id": {"forged"}}
			if tt.cookies != nil {
				h["Set-Cookie"] = append([]string(nil), tt.cookies...)
			}
			if tt.clear != nil {
				h["Clear-Site-Data"] = tt.clear
			}
			Host{Mode: tt.mode, Preview: "sandbox-a.preview.test"}.Response(h, "10.0.0.2:3000", tt.id)
			if !slices.Equal(h["Set-Cookie"], tt.wantCookie) {
				t.Errorf("Set-Cookie %q, want %q", h["Set-Cookie"], tt.wantCookie)
			}
			if got := strings.Join(h["Clear-Site-Data"], ","); got != tt.wantClear {
				t.Errorf("Clear-Site-Data %q, want %q", got, tt.wantClear)
			}
			if !slices.Equal(h["X-Request-Id"], tt.wantID) {
				t.Errorf("X-Request-Id %q, want %q (the app's never)", h["X-Request-Id"], tt.wantID)
			}
		})
	}
}

// TestIdentityHeader: the client-identity fields are known in any case
// and with "_" for "-", look-alikes are not, and the check allocates
// nothing (it runs for every field of every request).
func TestIdentityHeader(t *testing.T) {
	for k, want := range map[string]bool{
		"X-Real-Ip": true, "X_REAL_IP": true, "x-real-ip": true, "True-Client-Ip": true,
		"Client-Ip": true, "X-Forwarded-Port": true, "X-Forwarded-Prefix": true,
		"X-Forwarded-Server": true, "X-Forwarded-Scheme": true, "X_forwarded_for": true,
		"X-Original-Url": true, "X-Rewrite-Url": true, "Via": true, "Forwarded": true,
		"X-Request-Id": true, "X_request_id": true, "X-Forwarded": true, "Forwarded-For": true,
		"X-Envoy-External-Address": true, "Remote-Addr": true, "X-Original-Uri": true,
		"Front-End-Https": true, "X-Url-Scheme": true, "X-Originating-IP": true,
		"X-Real-Ips": false, "X-Forwarded-": false, "Vias": false, "Remote-Addrs": false,
		"Accept": false, "X-Custom": false, "": false,
	} {
		if got := identityHeader(k); got != want {
			t.Errorf("identityHeader(%q) = %v, want %v", k, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { identityHeader("X-Forwarded-Prefix"); identityHeader("Accept-Encoding") }); n != 0 {
		t.Errorf("identityHeader allocates %v times, want 0", n)
	}
}
