package links

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/previewgate/previewgate/auth"
)

// Find returns the link token r carries: in the query of a GET or HEAD
// navigation (fromQuery: Exchange it), else in the link cookie (on a
// WebSocket upgrade only with an allowed Origin: no cross-site WebSocket
// hijacking through a shared link, as for the token cookie).
func Find(r *http.Request, v *auth.Verifier) (token string, fromQuery, ok bool) {
	ws := auth.IsWebSocket(r)
	if !ws && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL != nil &&
		strings.Contains(r.URL.RawQuery, auth.LinkParam) {
		if q, err := url.ParseQuery(r.URL.RawQuery); err == nil {
			if t := q.Get(auth.LinkParam); t != "" {
				return t, true, true
			}
		}
	}
	if ws && !v.OriginAllowed(r) {
		return "", false, false
	}
	var buf [1]string
	if c := auth.Cookies(buf[:0], r, v.LinkCookieName()); len(c) > 0 {
		return c[0], false, true
	}
	return "", false, false
}

// Exchange answers a navigation carrying link token tok (granted until
// exp): 303 to the same URL without it, setting the link cookie until exp
// (auth's rules: host-only, so bound to this sandbox and port's host;
// HttpOnly, Secure, no-store, no-referrer, SameSite as for a token).
func Exchange(w http.ResponseWriter, r *http.Request, v *auth.Verifier, tok string, exp time.Time) {
	v.Redirect(w, r, &http.Cookie{Name: v.LinkCookieName(), Value: tok, Expires: exp, MaxAge: max(1, int(time.Until(exp).Seconds()))})
}
