// Package auth verifies the access tokens that backends mint for a sandbox,
// finds them in a request (header, cookie, one-time query parameter),
// exchanges a query token for a cookie, strips tokens before proxying, and
// mints tokens (CLI and Go API).
package auth

import (
	"errors"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/previewgate/previewgate/config"
)

// Errors from Check. ErrForbidden maps to 403, every other error to 401.
var (
	ErrMissing   = errors.New("no access token")
	ErrInvalid   = errors.New("invalid access token")
	ErrExpired   = errors.New("access token expired")
	ErrForbidden = errors.New("access token is for another sandbox")
	ErrOrigin    = errors.New("websocket origin not allowed") // wraps ErrForbidden
)

// Source says where a token was found.
type Source int

const (
	FromNone Source = iota
	FromHeader
	FromCookie
	FromQuery
)

// Claims are the token claims previewgate understands.
type Claims struct {
	jwt.RegisteredClaims
	Sandbox  string `json:"sbx"`
	Template string `json:"tpl,omitempty"`
}

// Result is a successful check.
type Result struct {
	Claims *Claims
	Source Source
	Raw    string
}

// Verifier checks tokens against one config snapshot. Safe for concurrent use.
type Verifier struct{}

// NewVerifier builds a verifier from cfg (reads key files, starts JWKS
// refresh if configured). tls says whether previews are served over TLS
// (cookie name and Secure handling). Close releases background work.
func NewVerifier(cfg config.Auth, tls bool) (*Verifier, error) { return &Verifier{}, nil }

// Close stops background JWKS refresh.
func (v *Verifier) Close() {}

// Check authenticates r for sandbox id.
func (v *Verifier) Check(r *http.Request, id string) (Result, error) {
	return Result{}, ErrMissing
}

// Exchange answers a query-token request: 303 to the same URL without
// access_token, sets the cookie. Call it when res.Source == FromQuery.
func (v *Verifier) Exchange(w http.ResponseWriter, r *http.Request, res Result) {}

// Strip removes the gateway's cookie, its Authorization header and the
// access_token query parameter from an outgoing request.
func (v *Verifier) Strip(out *http.Request) {}

// MintOptions describes a token to mint.
type MintOptions struct {
	Subject, Sandbox, Template, Issuer, Audience string
	TTL                                          time.Duration
}

// Mint signs a token with key (must hold a secret or a private key).
func Mint(key config.Key, o MintOptions) (string, error) { return "", errors.New("todo") }
