// Package auth verifies the access tokens that backends mint for a sandbox,
// finds them in a request (header, cookie, one-time query parameter),
// exchanges a query token for a cookie, strips tokens before proxying, and
// mints tokens (CLI and Go API).
//
// A Verifier is built from one config snapshot and never changes; a config
// reload builds a new one and closes the old. Every key pins its algorithm:
// "none" and HMAC-with-a-public-key confusion cannot pass. exp is required,
// nbf and iat are honoured with Leeway, aud must equal the configured
// audience, iss must be in the configured list (empty list: any), and sbx
// must equal the sandbox being accessed or be "*".
//
// Key selection by kid: a token names its key with the kid header. A token
// without kid is accepted only when exactly one static key is configured and
// no JWKS URL is set; with several keys (or a JWKS) it is invalid, so a token
// can never be tried against keys it was not meant for.
package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/previewgate/previewgate/config"
)

// Errors from Check. ErrForbidden maps to 403, every other error to 401.
// Check wraps them in an *Error whose Reason is short text for users.
var (
	ErrMissing         = errors.New("no access token")
	ErrInvalid         = errors.New("invalid access token")
	ErrExpired         = errors.New("access token expired")
	ErrForbidden       = errors.New("access token is for another sandbox")
	ErrOrigin    error = &sentinel{msg: "websocket origin not allowed", parent: ErrForbidden} // wraps ErrForbidden
)

type sentinel struct {
	msg    string
	parent error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.parent }

// Limits and timings.
const (
	// MaxTokenBytes is the largest token Check parses; larger ones are
	// invalid without being decoded.
	MaxTokenBytes = 8 << 10
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway = 30 * time.Second
	// cacheSize bounds the verified-token cache (entries, not bytes; only
	// tokens that verified get in, so an attacker cannot fill it).
	cacheSize = 4096
	// cacheMaxAge bounds how long a verification result is reused. Static
	// keys only change with a new Verifier, but a key removed from a JWKS
	// stops working for cached tokens within this time.
	cacheMaxAge = 5 * time.Minute
)

// Source says where a token was found.
type Source int

const (
	FromNone Source = iota
	FromHeader
	FromCookie
	FromQuery
)

var sourceNames = [...]string{FromNone: "none", FromHeader: "header", FromCookie: "cookie", FromQuery: "query"}

func (s Source) String() string {
	if s < 0 || int(s) >= len(sourceNames) {
		return "none"
	}
	return sourceNames[s]
}

// Claims are the token claims previewgate understands.
type Claims struct {
	jwt.RegisteredClaims
	Sandbox  string `json:"sbx"`
	Template string `json:"tpl,omitempty"`
}

// Result is a successful check. Claims may be shared with other requests
// carrying the same token (verification cache): treat it as read-only.
type Result struct {
	Claims *Claims
	Source Source
	Raw    string
	// Exchange says the request URL carries ?access_token= on a GET or
	// HEAD navigation that was not authenticated by its Authorization
	// header: the caller must answer with Verifier.Exchange instead of
	// serving it, so the token leaves the address bar. Source is FromQuery
	// when the query token itself verified (it becomes the cookie), or
	// FromCookie when only the cookie did (redirect, no new cookie).
	Exchange bool
}

// Error is what Check returns on failure. errors.Is matches it against
// ErrMissing, ErrInvalid, ErrExpired, ErrForbidden and ErrOrigin.
type Error struct {
	// Reason is short, safe to show users: "missing", "invalid",
	// "expired", "not yet valid", "wrong sandbox", "origin not allowed".
	Reason string
	Source Source // where the failing token came from (FromNone if missing)
	kind   error  // one of the exported sentinels
	err    error  // detail for logs; never contains the token
}

func (e *Error) Error() string {
	s := e.kind.Error()
	if e.Source != FromNone {
		s += " (" + e.Source.String() + ")"
	}
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *Error) Unwrap() []error {
	if e.err == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.err}
}

// Status is the HTTP status for an error from Check: 403 for ErrForbidden
// (and ErrOrigin), 401 otherwise.
func Status(err error) int {
	if errors.Is(err, ErrForbidden) {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// Reason is the short user-facing reason of an error from Check.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	switch {
	case errors.Is(err, ErrOrigin):
		return "origin not allowed"
	case errors.Is(err, ErrForbidden):
		return "wrong sandbox"
	case errors.Is(err, ErrExpired):
		return "expired"
	case errors.Is(err, ErrMissing):
		return "missing"
	}
	return "invalid"
}

// Verifier checks tokens against one config snapshot. Safe for concurrent use.
type Verifier struct {
	log        *slog.Logger
	now        func() time.Time
	tls        bool
	aud        string
	issuers    map[string]bool // empty: any issuer
	origins    map[string]bool // normalized allowed_origins
	cookieName string          // the name we set
	cookieBase string          // without the __Host- prefix; Strip removes both
	linkCookie string          // the share link cookie's name (links.go)

	keys map[string]*staticKey // by kid
	only *staticKey            // the sole static key, for tokens without kid (nil unless exactly one and no JWKS)

	jwks       keyfunc.Keyfunc // nil without jwks_url
	jwksParser *jwt.Parser
	jwksEvery  time.Duration // min interval between unknown-kid refreshes
	cancel     context.CancelFunc

	cache *lru.Cache[string, cacheEntry] // raw token → verified claims
}

type cacheEntry struct {
	claims *Claims
	until  time.Time // reuse while now is before this
}

// Option adjusts a Verifier.
type Option func(*Verifier)

// WithLogger sets the logger for background work (JWKS refresh failures).
// The default discards.
func WithLogger(l *slog.Logger) Option { return func(v *Verifier) { v.log = l } }

// NewVerifier builds a verifier from cfg (reads key files, starts JWKS
// refresh if configured). tls says whether previews are served over TLS
// (cookie name and Secure handling). Close releases background work.
//
// A verifier without keys and without a JWKS URL is valid and rejects every
// token (for configs where everything is public).
func NewVerifier(cfg config.Auth, tls bool, opts ...Option) (*Verifier, error) {
	v := &Verifier{
		log:       slog.New(slog.DiscardHandler),
		now:       time.Now,
		tls:       tls,
		aud:       cmp.Or(cfg.Audience, config.DefaultAudience),
		issuers:   make(map[string]bool, len(cfg.Issuers)),
		origins:   make(map[string]bool, len(cfg.AllowedOrigins)),
		keys:      make(map[string]*staticKey, len(cfg.Keys)),
		jwksEvery: time.Minute,
	}
	for _, o := range opts {
		o(v)
	}
	for _, iss := range cfg.Issuers {
		v.issuers[iss] = true
	}
	for _, o := range cfg.AllowedOrigins {
		v.origins[normalizeOrigin(o)] = true
	}
	v.cookieBase, v.cookieName = cookieNames(cfg.CookieName, tls)
	_, v.linkCookie = cookieNames(linkCookieBase, tls)

	for i, k := range cfg.Keys {
		sk, err := v.newStaticKey(k)
		if err != nil {
			return nil, fmt.Errorf("auth key %d (kid %q): %w", i, k.KID, err)
		}
		if _, dup := v.keys[k.KID]; dup {
			return nil, fmt.Errorf("auth key %d: duplicate kid %q", i, k.KID)
		}
		if k.KID == "" && len(cfg.Keys) > 1 {
			return nil, fmt.Errorf("auth key %d: kid is required when several keys are configured", i)
		}
		v.keys[k.KID] = sk
	}
	if len(cfg.Keys) == 1 && cfg.JWKSURL == "" {
		for _, sk := range v.keys {
			v.only = sk
		}
	}
	if cfg.JWKSURL != "" {
		if err := v.startJWKS(cfg.JWKSURL); err != nil {
			return nil, err
		}
	}
	c, err := lru.New[string, cacheEntry](cacheSize)
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("auth cache: %w", err)
	}
	v.cache = c
	return v, nil
}

// Close stops background JWKS refresh. The verifier keeps working with the
// keys it has; Close is idempotent. The refresh goroutine belongs to
// keyfunc/jwkset, which offers no way to wait for it; it exits on its next
// select after the cancel.
func (v *Verifier) Close() {
	if v.cancel != nil {
		v.cancel()
	}
}

// CookieName is the name of the cookie Exchange sets and Check reads.
func (v *Verifier) CookieName() string { return v.cookieName }

// Check authenticates r for sandbox id.
//
// Candidates are tried in order: Authorization: Bearer, the gateway cookie
// (every copy, at most a few), then ?access_token= (GET and HEAD only, never
// on a WebSocket upgrade). A valid header wins outright. Otherwise a valid
// query token wins over a valid cookie, so a fresh token replaces an older
// cookie; either way Result.Exchange is set when the URL carries a query
// token, so a cookie-authenticated navigation still gets the token out of
// the address bar. An app that uses its own Authorization header, or a
// stale cookie next to a fresh query token, does not lock the user out. If
// none passes, the most telling failure is returned (origin > wrong sandbox
// > expired > invalid), or ErrMissing if there was no candidate.
//
// A cookie-authenticated WebSocket upgrade must carry an Origin equal to the
// preview's own origin or one in allowed_origins (cross-site WebSocket
// hijacking of HMR sockets); header-authenticated upgrades need no origin.
func (v *Verifier) Check(r *http.Request, id string) (Result, error) {
	upgrade := IsWebSocket(r)
	var best *Error
	try := func(raw string, src Source) (Result, bool) {
		claims, err := v.verify(r.Context(), raw)
		if err == nil && claims.Sandbox != id && claims.Sandbox != "*" {
			err = &Error{Reason: "wrong sandbox", kind: ErrForbidden}
		}
		if err == nil && src == FromCookie && upgrade && !v.OriginAllowed(r) {
			err = &Error{Reason: "origin not allowed", kind: ErrOrigin,
				err: fmt.Errorf("origin %q", truncate(r.Header.Get("Origin"), 100))}
		}
		if err == nil {
			return Result{Claims: claims, Source: src, Raw: raw}, true
		}
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Reason: "invalid", kind: ErrInvalid, err: err}
		}
		e.Source = src
		if best == nil || rank(e) > rank(best) {
			best = e
		}
		return Result{}, false
	}

	if raw, ok := bearerToken(r.Header); ok {
		if res, ok := try(raw, FromHeader); ok {
			return res, nil
		}
	}
	var cookie Result
	cookieOK := false
	var buf [maxCookieCandidates]string
	for _, raw := range cookieValues(buf[:0], r.Header["Cookie"], v.cookieName) {
		if cookie, cookieOK = try(raw, FromCookie); cookieOK {
			break
		}
	}
	// The query is looked at only where Exchange may answer: a WebSocket
	// or a POST cannot follow a redirect without losing what it carries.
	qraw, inURL := "", false
	if !upgrade && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL != nil {
		qraw, inURL = queryToken(r.URL.RawQuery)
	}
	if inURL {
		if res, ok := try(qraw, FromQuery); ok {
			res.Exchange = true
			return res, nil
		}
	}
	if cookieOK {
		cookie.Exchange = inURL
		return cookie, nil
	}
	if best == nil {
		return Result{}, &Error{Reason: "missing", kind: ErrMissing}
	}
	return Result{}, best
}

// failureRank orders Check's failures by how telling they are; any other
// ranks 1 (invalid).
var failureRank = map[error]int{ErrOrigin: 4, ErrForbidden: 3, ErrExpired: 2}

func rank(e *Error) int { return max(1, failureRank[e.kind]) }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// normalizeOrigin lowercases an origin, drops a trailing slash and the
// scheme's default port, so "HTTPS://App.example.com:443/" equals
// "https://app.example.com".
func normalizeOrigin(o string) string {
	o = strings.ToLower(strings.TrimSpace(o))
	o = strings.TrimSuffix(o, "/")
	switch {
	case strings.HasPrefix(o, "https://"):
		o = strings.TrimSuffix(o, ":443")
	case strings.HasPrefix(o, "http://"):
		o = strings.TrimSuffix(o, ":80")
	}
	return o
}
