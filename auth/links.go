package auth

import "net/http"

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
