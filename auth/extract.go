package auth

import (
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
)

// maxCookieCandidates bounds how many copies of our cookie Check tries. A
// browser may send two (partitioned and not); more is noise or an attack.
const maxCookieCandidates = 4

// bearerToken returns the token of the first Authorization header if it
// uses the Bearer scheme (case-insensitive) and is not empty.
func bearerToken(h http.Header) (string, bool) {
	vals := h["Authorization"]
	if len(vals) == 0 {
		return "", false
	}
	return parseBearer(vals[0])
}

func parseBearer(s string) (string, bool) {
	const scheme = "bearer"
	if len(s) <= len(scheme) || !strings.EqualFold(s[:len(scheme)], scheme) || (s[len(scheme)] != ' ' && s[len(scheme)] != '\t') {
		return "", false
	}
	tok := strings.TrimSpace(s[len(scheme):])
	return tok, tok != ""
}

// cookieValues appends to dst the values of every cookie called name in
// the Cookie header lines, up to maxCookieCandidates (dst's capacity is
// reused). Parsing follows RFC 6265 §5.4 loosely, like browsers send it:
// pairs separated by ";", optional spaces, optional double quotes around
// the value. Pairs without "=" are skipped.
func cookieValues(dst []string, lines []string, name string) []string {
	for _, line := range lines {
		for line != "" && len(dst) < maxCookieCandidates {
			var part string
			part, line, _ = strings.Cut(line, ";")
			k, val, ok := strings.Cut(part, "=")
			if !ok || strings.TrimSpace(k) != name {
				continue
			}
			val = strings.TrimSpace(val)
			if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
				val = val[1 : len(val)-1]
			}
			if val != "" {
				dst = append(dst, val)
			}
		}
	}
	return dst
}

// queryToken returns the first non-empty access_token value in a raw
// query. Check runs it on every cookie-authenticated GET, so a query that
// cannot spell access_token (neither the literal name nor any
// percent-escape) is passed over without decoding anything.
func queryToken(rawQuery string) (string, bool) {
	if !strings.Contains(rawQuery, "access_token") && !strings.Contains(rawQuery, "%") {
		return "", false
	}
	q := rawQuery
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if pair == "" || (pair[0] != 'a' && pair[0] != '%') {
			continue // every spelling of access_token starts with 'a' or an escape
		}
		k, val, _ := strings.Cut(pair, "=")
		if !isQueryKey(k, accessTokenParam) {
			continue
		}
		if u, err := url.QueryUnescape(val); err == nil {
			val = u
		}
		if val != "" {
			return val, true
		}
	}
	return "", false
}

const accessTokenParam = "access_token"

// isQueryKey reports whether a raw query key is name, including
// percent-encoded spellings (access%5Ftoken), which Go's and most
// frameworks' query parsers decode to the same name.
func isQueryKey(k, name string) bool {
	if k == name {
		return true
	}
	// An escape takes three bytes for one, so an escaped spelling is
	// longer than the name and at most three times as long; "+" decodes
	// to a space, which the name does not have. Most keys stop here,
	// before any decoding.
	if len(k) <= len(name) || len(k) > 3*len(name) || strings.IndexByte(k, '%') < 0 {
		return false
	}
	u, err := url.QueryUnescape(k)
	return err == nil && u == name
}

// IsWebSocket reports a WebSocket upgrade: an Upgrade header naming
// websocket (with or without Connection: upgrade, so nothing can slip past
// by omitting it), or an HTTP/2 extended CONNECT for websocket (RFC 8441).
func IsWebSocket(r *http.Request) bool {
	for _, v := range r.Header["Upgrade"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(textproto.TrimString(tok), "websocket") {
				return true
			}
		}
	}
	return r.Method == http.MethodConnect && strings.EqualFold(r.Header.Get(":protocol"), "websocket")
}

// OriginAllowed reports whether a cookie-authenticated upgrade may
// proceed: exactly one Origin header, equal to the preview's own origin
// (OwnOrigin) or an allowed one. A share link's cookie is held to the same
// rule as a token's (cross-site WebSocket hijacking; another sandbox's
// page is same-site).
func (v *Verifier) OriginAllowed(r *http.Request) bool {
	vals := r.Header["Origin"]
	if len(vals) != 1 {
		return false
	}
	o := normalizeOrigin(vals[0])
	return v.ownOrigin(r.Host, o) || o != "" && o != "null" && v.origins[o]
}

// OwnOrigin reports whether r carries exactly one Origin header and it is
// the preview's own origin (the rule of the cookie-authenticated upgrade
// check, without allowed_origins). The gateway's local host mode shows
// the app only such an Origin as its local one (#22).
func (v *Verifier) OwnOrigin(r *http.Request) bool {
	vals := r.Header["Origin"]
	return len(vals) == 1 && v.ownOrigin(r.Host, normalizeOrigin(vals[0]))
}

// ownOrigin reports whether the normalized origin o is host's own. Over
// TLS only https://host is; without TLS (plain HTTP, or TLS terminated in
// front of us) both schemes are.
func (v *Verifier) ownOrigin(host, o string) bool {
	host = strings.ToLower(host)
	if host == "" || o == "" || o == "null" {
		return false
	}
	if o == normalizeOrigin("https://"+host) {
		return true
	}
	return !v.tls && o == normalizeOrigin("http://"+host)
}
