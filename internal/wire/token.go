package wire

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// CanonicalKey validates a header name and returns its canonical form
// (http.CanonicalHeaderKey), without allocating when it already is, or
// when it is a common name in other case ("content-type").
func CanonicalKey(k string) (string, error) {
	canon, upper := true, true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !tokenByte[c] {
			if c == ' ' {
				return "", fmt.Errorf("%w: %q", ErrSpaceInName, k)
			}
			return "", fmt.Errorf("malformed header name %q", k)
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canon = false
		}
		upper = c == '-'
	}
	if canon {
		return k, nil
	}
	var buf [32]byte
	if len(k) <= len(buf) {
		b := buf[:len(k)]
		upper := true
		for i := 0; i < len(k); i++ {
			c := k[i]
			if upper && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			} else if !upper && 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b[i] = c
			upper = c == '-'
		}
		if common, ok := commonKeys[string(b)]; ok {
			return common, nil
		}
	}
	return http.CanonicalHeaderKey(k), nil
}

// commonKeys interns the names dev servers commonly send in lower case.
var commonKeys = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept-Ranges", "Access-Control-Allow-Credentials", "Access-Control-Allow-Headers",
		"Access-Control-Allow-Methods", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers",
		"Access-Control-Max-Age", "Age", "Cache-Control", "Connection", "Content-Disposition",
		"Content-Encoding", "Content-Language", "Content-Length", "Content-Location", "Content-Range",
		"Content-Security-Policy", "Content-Type", "Cross-Origin-Embedder-Policy",
		"Cross-Origin-Opener-Policy", "Cross-Origin-Resource-Policy", "Date", "Etag", "Expires",
		"Keep-Alive", "Last-Modified", "Link", "Location", "Pragma", "Referrer-Policy", "Server",
		"Set-Cookie", "Strict-Transport-Security", "Trailer", "Transfer-Encoding", "Vary",
		"X-Content-Type-Options", "X-Frame-Options", "X-Powered-By", "X-Xss-Protection",
	} {
		m[k] = k
	}
	return m
}()

// tokenByte reports the bytes of an HTTP token (RFC 9110 5.6.2), as
// textproto's validHeaderFieldByte.
var tokenByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// ContainsToken reports whether a comma-separated list in any of vv holds
// token, ignoring ASCII case (httpguts.HeaderValuesContainsToken).
func ContainsToken(vv []string, token string) bool {
	for _, v := range vv {
		for v != "" {
			f := v
			if i := strings.IndexByte(v, ','); i >= 0 {
				f, v = v[:i], v[i+1:]
			} else {
				v = ""
			}
			if EqualFold(TrimOWS(f), token) {
				return true
			}
		}
	}
	return false
}

// EqualFold compares ASCII header names or tokens case-insensitively, as
// net/http does (no Unicode folding).
func EqualFold[T string | []byte](b T, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(ch byte) byte {
	if 'A' <= ch && ch <= 'Z' {
		return ch + 'a' - 'A'
	}
	return ch
}

// TrimOWS drops leading and trailing spaces and tabs (HTTP's OWS).
func TrimOWS[T string | []byte](s T) T {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// IsToken reports whether c may appear in an HTTP token (a header name).
func IsToken(c byte) bool { return tokenByte[c] }

// ErrSpaceInName: whitespace between a header name and its colon, a known
// smuggling vector (RFC 9112 5.1) refused rather than repaired.
var ErrSpaceInName = errors.New("whitespace between header name and colon")
