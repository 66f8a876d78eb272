package auth

import (
	"cmp"
	"net/http"
	"net/url"
	"strings"

	"github.com/golang-jwt/jwt/v5"
	"github.com/previewgate/previewgate/internal/wire"
)

// DefaultCookieName is the cookie's base name; over TLS it gets the
// __Host- prefix (host-only, Path=/, Secure enforced by browsers).
const DefaultCookieName = "previewgate_token"

const hostPrefix = "__Host-"

// What auth keeps of share links (package links owns them whole): the
// names a link travels under, so Strip removes them before a request
// reaches the sandbox, and the rules its cookie follows, as the token's
// does (cookie.go: Redirect; extract.go: the origin check).

// LinkParam is the query parameter of a share link's URL.
const LinkParam = "previewgate_link"

// linkCookieBase is the link cookie's name (with __Host- over TLS).
const linkCookieBase = "previewgate_link"

// LinkCookieName is the share link cookie's name under this verifier
// (__Host-previewgate_link over TLS).
func (v *Verifier) LinkCookieName() string { return v.linkCookie }

// Cookies appends to dst the values of every cookie called name that r
// carries, at most maxCookieCandidates, in order: a page of another
// sandbox may have set one of that name for the whole domain (without
// TLS there is no __Host- prefix), and it must not shadow the user's own.
func Cookies(dst []string, r *http.Request, name string) []string {
	return cookieValues(dst, r.Header["Cookie"], name)
}

// cookieNames returns the base name (no prefix) and the name to use.
func cookieNames(configured string, tls bool) (base, name string) {
	base = configured
	for _, p := range []string{hostPrefix, "__Secure-"} {
		base = strings.TrimPrefix(base, p)
	}
	base = cmp.Or(base, DefaultCookieName)
	if tls {
		return base, hostPrefix + base
	}
	return base, base
}

// Exchange answers a request whose URL carries a token (call it, instead
// of serving the request, when res.Exchange is set) with Redirect. When
// the query token is what verified (res.Source == FromQuery) it also
// becomes the cookie, replacing an older one, and the cookie expires with
// the token; when only the cookie verified, the redirect sets nothing,
// because the query token is not one we would hand back to the browser.
func (v *Verifier) Exchange(w http.ResponseWriter, r *http.Request, res Result) {
	var c *http.Cookie
	if res.Source == FromQuery {
		c = &http.Cookie{Name: v.cookieName, Value: res.Raw}
		if res.Claims != nil && res.Claims.ExpiresAt != nil {
			exp := res.Claims.ExpiresAt.Time
			c.Expires = exp
			c.MaxAge = max(1, int(exp.Sub(v.now()).Seconds()))
		}
	}
	v.Redirect(w, r, c)
}

// Redirect answers r, a navigation whose URL carries a credential (a
// token, a share link): 303 to the same URL without it (redirectTarget:
// the path and every other query parameter kept in order, byte for byte),
// with Cache-Control: no-store and Referrer-Policy: no-referrer so the
// credential is neither cached nor sent on, setting c (nil: nothing) with
// the attributes every cookie of the gateway has: host-only, Path=/,
// HttpOnly, Secure (browsers accept Secure from http://localhost too), and
// SameSite=Lax, or SameSite=None; Partitioned inside a cross-site frame
// (Sec-Fetch-Dest: iframe, Sec-Fetch-Site: cross-site), so it works where
// third-party cookies are blocked. c's name, value and expiry are the
// caller's.
func (v *Verifier) Redirect(w http.ResponseWriter, r *http.Request, c *http.Cookie) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Location", redirectTarget(r.URL))
	if c != nil {
		c.Domain, c.Path, c.HttpOnly, c.Secure, c.SameSite = "", "/", true, true, http.SameSiteLaxMode
		if crossSiteFrame(r) {
			c.SameSite, c.Partitioned = http.SameSiteNoneMode, true
		}
		http.SetCookie(w, c)
	}
	w.WriteHeader(http.StatusSeeOther)
}

func crossSiteFrame(r *http.Request) bool {
	dest := strings.ToLower(r.Header.Get("Sec-Fetch-Dest"))
	return (dest == "iframe" || dest == "frame") && strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site")
}

// redirectTarget is u's path and query without access_token, as a
// path-absolute reference. A path starting with "//" would read as
// another host ("//evil.example/"), so it becomes "/.//evil.example/",
// which browsers resolve to the same path on the same host.
func redirectTarget(u *url.URL) string {
	if u == nil {
		return "/"
	}
	p := u.EscapedPath()
	switch {
	case p == "" || p[0] != '/':
		p = "/" + p
	case strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\"):
		p = "/." + p
	}
	if q := removeAccessToken(u.RawQuery); q != "" {
		p += "?" + q
	}
	return p
}

// removeAccessToken drops every access_token (and share link) pair from a raw query and
// keeps the other pairs and their order byte for byte.
func removeAccessToken(rawQuery string) string {
	if !strings.Contains(rawQuery, "access") && !strings.Contains(rawQuery, "%") && !strings.Contains(rawQuery, LinkParam) {
		return rawQuery
	}
	var b strings.Builder
	q := rawQuery
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		k, _, _ := strings.Cut(pair, "=")
		if isQueryKey(k, accessTokenParam) || isQueryKey(k, LinkParam) {
			continue // a share link's token too (package links)
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(pair)
	}
	return b.String()
}

// Strip removes the gateway's cookie, its Authorization header and the
// access_token query parameter from an outgoing request.
//
// Both cookie spellings (with and without __Host-) go; other cookies keep
// their bytes and order, and a Cookie line is only rewritten when it held
// ours. Authorization is removed when it is a Bearer JWT meant for us
// (its aud names our audience, or its kid is one of our keys), so an app
// that uses its own bearer tokens keeps them. access_token also goes from
// the Referer, in case the address bar still had it.
func (v *Verifier) Strip(out *http.Request) {
	e, query := v.Stripped(out)
	e.Apply(out.Header)
	if out.URL != nil {
		out.URL.RawQuery = query
	}
}

// Stripped is Strip for a proxy that writes r's header lines itself: it
// returns the token-carrying headers (Cookie, Authorization, Referer)
// Strip changes, as Strip leaves them (nil lines: removed), and r's raw
// query without the token, and changes nothing in r. Strip is Stripped
// applied.
func (v *Verifier) Stripped(r *http.Request) (e wire.Edits, query string) {
	if lines := r.Header["Cookie"]; len(lines) > 0 {
		if kept, changed := v.stripCookies(lines); changed {
			e.Set("Cookie", kept)
		}
	}
	if vals := r.Header["Authorization"]; len(vals) > 0 {
		if kept, changed := v.stripAuthorization(vals); changed {
			e.Set("Authorization", kept)
		}
	}
	if refs := r.Header["Referer"]; len(refs) > 0 && strings.Contains(refs[0], "?") {
		if u, err := url.Parse(refs[0]); err == nil {
			if q := removeAccessToken(u.RawQuery); q != u.RawQuery {
				u.RawQuery = q
				e.Set("Referer", []string{u.String()})
			}
		}
	}
	if r.URL != nil {
		query = removeAccessToken(r.URL.RawQuery)
	}
	return e, query
}

// stripCookies returns Cookie lines without ours (nil if none is left),
// and whether any line held ours.
func (v *Verifier) stripCookies(lines []string) (kept []string, changed bool) {
	kept = lines[:0:0]
	for _, line := range lines {
		nl, ch := v.stripCookieLine(line)
		changed = changed || ch
		if nl != "" {
			kept = append(kept, nl)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	return kept, changed
}

// stripAuthorization returns Authorization values without a Bearer JWT
// meant for us (nil if none is left), and whether one was removed.
func (v *Verifier) stripAuthorization(vals []string) (kept []string, changed bool) {
	kept = vals[:0:0]
	for _, a := range vals {
		if tok, ok := parseBearer(a); ok && v.isOurs(tok) {
			continue
		}
		kept = append(kept, a)
	}
	if len(kept) == 0 {
		kept = nil
	}
	return kept, len(kept) != len(vals)
}

// stripCookieLine removes our cookies from one Cookie header line. It
// reports whether anything was removed; if not, line is returned as is.
func (v *Verifier) stripCookieLine(line string) (string, bool) {
	if !strings.Contains(line, v.cookieBase) && !strings.Contains(line, linkCookieBase) {
		return line, false
	}
	var b strings.Builder
	changed := false
	rest := line
	for rest != "" {
		var part string
		part, rest, _ = strings.Cut(rest, ";")
		k, _, _ := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if k == v.cookieBase || k == hostPrefix+v.cookieBase || k == v.cookieName ||
			k == linkCookieBase || k == hostPrefix+linkCookieBase {
			changed = true
			continue
		}
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(part)
	}
	if !changed {
		return line, false
	}
	return b.String(), true
}

// isOurs reports whether a bearer token is meant for this gateway: it
// verified before (cached), its unverified aud contains our audience, or
// its kid names one of our static keys. Nothing here trusts the token; it
// only decides whether to keep it from the sandbox.
func (v *Verifier) isOurs(tok string) bool {
	if _, ok := v.cache.Peek(tok); ok {
		return true
	}
	if kid, ok, err := peekKID(tok); err == nil && ok && v.keys[kid] != nil {
		return true
	}
	if len(tok) > MaxTokenBytes {
		return false
	}
	var c Claims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		return false
	}
	for _, a := range c.Audience {
		if a == v.aud {
			return true
		}
	}
	return false
}
