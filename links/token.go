package links

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxToken bounds a link token's length before any work on it.
const maxToken = 128

// newToken mints a link token expiring at exp, and returns its id, the
// token for the URL, and the digest to keep.
func newToken(exp time.Time) (id, token, digest string, err error) {
	var b [40]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", "", err
	}
	id = "l" + hex.EncodeToString(b[:6])
	token = id + "." + strconv.FormatInt(exp.Unix(), 36) + "." + base64.RawURLEncoding.EncodeToString(b[8:])
	return id, token, Digest(token), nil
}

// Digest is what is kept of token.
func Digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// matches reports, in constant time, whether token has digest.
func matches(token, digest string) bool {
	return subtle.ConstantTimeCompare([]byte(Digest(token)), []byte(digest)) == 1
}

// parse reads a link token's id and claimed expiry (not verified).
func parse(token string) (id string, exp time.Time, ok bool) {
	if len(token) > maxToken {
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
