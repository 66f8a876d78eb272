package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Share links (#23). A link is a grant for one sandbox, one port and one
// path prefix until it expires or is revoked. Its token is
// "<id>.<expiry, unix seconds, base 36>.<32 random bytes, base64url>";
// the gateway keeps only its id and the SHA-256 of the whole token (the
// manager's per-sandbox record, in the runtime), so a list never shows a
// secret and a stolen record opens nothing. The expiry in the token only
// chooses what an unknown link's page says (expired or not); what grants
// access is the kept record: digest, port, path, expiry, revocation.
//
// The token travels once as ?previewgate_link= on a GET navigation, which
// the gateway exchanges for a cookie bound to that link (ExchangeLink,
// like ?access_token=), and then as that cookie. Strip removes both
// before a request reaches the sandbox, and the access log records the
// path only.

// LinkParam is the query parameter of a share link's URL.
const LinkParam = "previewgate_link"

// linkCookieBase is the link cookie's name (with __Host- over TLS).
const linkCookieBase = "previewgate_link"

// maxLinkToken bounds a link token's length before any work on it.
const maxLinkToken = 128

// NewLink mints a link token expiring at exp, and returns its id, the
// token for the URL, and the digest to keep.
func NewLink(exp time.Time) (id, token, digest string, err error) {
	var b [40]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", "", err
	}
	id = "l" + hex.EncodeToString(b[:6])
	token = id + "." + strconv.FormatInt(exp.Unix(), 36) + "." + base64.RawURLEncoding.EncodeToString(b[8:])
	return id, token, LinkDigest(token), nil
}

// LinkDigest is what is kept of token.
func LinkDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// LinkMatches reports, in constant time, whether token has digest.
func LinkMatches(token, digest string) bool {
	return subtle.ConstantTimeCompare([]byte(LinkDigest(token)), []byte(digest)) == 1
}

// ParseLink reads a link token's id and claimed expiry (not verified).
func ParseLink(token string) (id string, exp time.Time, ok bool) {
	if len(token) > maxLinkToken {
		return "", time.Time{}, false
	}
	id, rest, ok1 := strings.Cut(token, ".")
	e, secret, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || len(id) != 13 || id[0] != 'l' || secret == "" {
		return "", time.Time{}, false
	}
	if _, err := hex.DecodeString(id[1:]); err != nil {
		return "", time.Time{}, false
	}
	n, err := strconv.ParseInt(e, 36, 64)
	if err != nil || n <= 0 {
		return "", time.Time{}, false
	}
	return id, time.Unix(n, 0), true
}

// PathWithin reports whether path is prefix or below it, on a segment
// boundary: /docs holds /docs, /docs/ and /docs/a, not /docsx.
func PathWithin(path, prefix string) bool {
	if prefix == "" || prefix == "/" {
		return true
	}
	prefix = strings.TrimSuffix(prefix, "/")
	rest, ok := strings.CutPrefix(path, prefix)
	return ok && (rest == "" || rest[0] == '/')
}

// RequestWithin reports whether u's path is prefix or below it as any
// server may read it: decoded and as sent (an encoded "/" is not a
// separator to every server), with no dot segment ("." or "..", also
// with the ";" suffix some servers drop, or between backslashes, which
// some servers take for "/"), so that no server's normalizing lands
// outside prefix.
func RequestWithin(u *url.URL, prefix string) bool {
	if !PathWithin(u.Path, prefix) || !PathWithin(u.EscapedPath(), (&url.URL{Path: prefix}).EscapedPath()) {
		return false
	}
	for _, seg := range strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg, _, _ = strings.Cut(seg, ";"); seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// Link returns the link token r carries: in the query of a GET or HEAD
// navigation (fromQuery: exchange it), else in the link cookie (on a
// WebSocket upgrade only with an allowed Origin, see originAllowed).
func (v *Verifier) Link(r *http.Request) (token string, fromQuery, ok bool) {
	if !isWebSocket(r) && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL != nil &&
		strings.Contains(r.URL.RawQuery, LinkParam) {
		if q, err := url.ParseQuery(r.URL.RawQuery); err == nil {
			if t := q.Get(LinkParam); t != "" {
				return t, true, true
			}
		}
	}
	if isWebSocket(r) && !v.originAllowed(r) {
		// A link cookie opens a WebSocket only from the preview's own
		// origin or an allowed one, as the token cookie does (no
		// cross-site WebSocket hijacking through a shared link).
		return "", false, false
	}
	var buf [maxCookieCandidates]string
	for _, c := range cookieValues(buf[:0], r.Header["Cookie"], v.linkCookie) {
		if c != "" {
			return c, false, true
		}
	}
	return "", false, false
}

// OriginAllowed reports whether an upgrade that a cookie lets in comes
// from the preview's own origin or an allowed one: a link cookie's
// WebSocket is held to Check's rule for a token cookie's (cross-site
// WebSocket hijacking; another sandbox's page is same-site).
func (v *Verifier) OriginAllowed(r *http.Request) bool { return v.originAllowed(r) }

// LinkCookies returns every link cookie value r carries (at most
// maxCookieCandidates), in order: without TLS the cookie has no __Host-
// prefix, so a page of another sandbox can set one of that name for the
// whole domain, and it must not shadow the user's own.
func (v *Verifier) LinkCookies(r *http.Request) []string {
	return cookieValues(nil, r.Header["Cookie"], v.linkCookie)
}

// ExchangeLink answers a navigation carrying a link token: 303 to the
// same URL without it, setting the link cookie until exp (host-only, so
// bound to this sandbox and port's host; HttpOnly, Secure, no-store,
// no-referrer, SameSite as Exchange's).
func (v *Verifier) ExchangeLink(w http.ResponseWriter, r *http.Request, token string, exp time.Time) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Location", redirectTarget(r.URL))
	c := &http.Cookie{Name: v.linkCookie, Value: token, Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteLaxMode, Expires: exp, MaxAge: max(1, int(exp.Sub(v.now()).Seconds()))}
	if crossSiteFrame(r) {
		c.SameSite, c.Partitioned = http.SameSiteNoneMode, true
	}
	http.SetCookie(w, c)
	w.WriteHeader(http.StatusSeeOther)
}

// isLinkKey reports whether a raw query key is previewgate_link, in any
// percent-encoded spelling.
func isLinkKey(k string) bool {
	if k == LinkParam {
		return true
	}
	if len(k) <= len(LinkParam) || len(k) > 3*len(LinkParam) || strings.IndexByte(k, '%') < 0 {
		return false
	}
	u, err := url.QueryUnescape(k)
	return err == nil && u == LinkParam
}
