package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// sessionKey derives the session MAC key from the admin token; nil when
// no admin token is configured (the page stays closed).
func (u *ui) sessionKey() []byte {
	tok := u.a.o.Config().AdminToken
	if tok == "" {
		return nil
	}
	k := sha256.Sum256([]byte("previewgate admin session\x00" + string(tok)))
	return k[:]
}

func mac(key []byte, parts ...string) string {
	h := hmac.New(sha256.New, key)
	io.WriteString(h, strings.Join(parts, "\x00"))
	return hex.EncodeToString(h.Sum(nil))
}

// newSession returns a cookie value valid until exp.
func newSession(key []byte, exp time.Time) string {
	var n [16]byte
	rand.Read(n[:])
	v := strconv.FormatInt(exp.Unix(), 10) + "." + hex.EncodeToString(n[:])
	return v + "." + mac(key, "session", v)
}

// validSession reports whether r carries a live session cookie, and
// returns its value.
func (u *ui) validSession(r *http.Request) (string, bool) {
	key := u.sessionKey()
	c, err := r.Cookie(sessionCookie)
	if key == nil || err != nil || len(c.Value) > 200 {
		return "", false
	}
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 || !hmac.Equal([]byte(c.Value[i+1:]), []byte(mac(key, "session", c.Value[:i]))) {
		return "", false
	}
	expS, _, _ := strings.Cut(c.Value, ".")
	exp, err := strconv.ParseInt(expS, 10, 64)
	if err != nil || time.Now().Unix() >= exp {
		return "", false
	}
	return c.Value, true
}

// csrfToken is bound to the session cookie value.
func (u *ui) csrfToken(session string) string {
	return mac(u.sessionKey(), "csrf", session)[:40]
}

// sameOrigin reports whether a POST comes from the page's own origin.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		return o == scheme+"://"+r.Host
	}
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

// session admits a request with a live session; others get the login form.
func (u *ui) session(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := u.validSession(r)
		if !ok {
			u.render(w, http.StatusUnauthorized, pageData{Login: true})
			return
		}
		h(w, r, s)
	}
}

// post admits a POST with a live session, the page's origin and the
// session's CSRF token.
func (u *ui) post(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxConfigBytes+64<<10)
		s, ok := u.validSession(r)
		switch {
		case !sameOrigin(r):
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
		case !ok:
			u.render(w, http.StatusUnauthorized, pageData{Login: true})
		case !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(u.csrfToken(s))):
			http.Error(w, "missing or wrong CSRF token; reload the page", http.StatusForbidden)
		default:
			h(w, r, s)
		}
	}
}

func (u *ui) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if !sameOrigin(r) { // no login CSRF either
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	key := u.sessionKey()
	if key == nil || !tokenEqual(r.PostFormValue("token"), string(u.a.o.Config().AdminToken)) {
		u.render(w, http.StatusUnauthorized, pageData{Login: true, Error: "That is not the admin token."})
		return
	}
	exp := time.Now().Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: newSession(key, exp), Path: "/ui/",
		Expires: exp, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	u.a.o.Log.InfoContext(r.Context(), "admin page login", "remote", r.RemoteAddr)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (u *ui) logout(w http.ResponseWriter, r *http.Request, _ string) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}
