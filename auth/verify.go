package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// verify checks raw's signature and claims, except the sandbox, which
// Check compares per request. Results that pass are cached per raw token
// until exp (plus Leeway) or cacheMaxAge, whichever is first; failures are
// never cached. Errors are *Error without Source.
func (v *Verifier) verify(ctx context.Context, raw string) (*Claims, error) {
	if len(raw) > MaxTokenBytes {
		return nil, &Error{Reason: "invalid", kind: ErrInvalid,
			err: fmt.Errorf("token is %d bytes, limit %d", len(raw), MaxTokenBytes)}
	}
	now := v.now()
	if e, ok := v.cache.Get(raw); ok {
		if now.Before(e.until) {
			return e.claims, nil
		}
		v.cache.Remove(raw)
	}
	claims, err := v.parse(ctx, raw)
	if err != nil {
		return nil, classify(err)
	}
	until := claims.ExpiresAt.Add(Leeway)
	if m := now.Add(cacheMaxAge); m.Before(until) {
		until = m
	}
	v.cache.Add(raw, cacheEntry{claims: claims, until: until})
	return claims, nil
}

// errNoKey marks a token whose key we do not have.
var errNoKey = errors.New("unknown key")

func (v *Verifier) parse(ctx context.Context, raw string) (*Claims, error) {
	kid, hasKid, err := peekKID(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", jwt.ErrTokenMalformed, err)
	}
	var c Claims
	switch sk := v.keys[kid]; {
	case hasKid && sk != nil:
		_, err = sk.parser.ParseWithClaims(raw, &c, sk.keyfunc)
	case !hasKid && v.only != nil:
		_, err = v.only.parser.ParseWithClaims(raw, &c, v.only.keyfunc)
	case hasKid && v.jwks != nil:
		// Refreshes the set (rate limited) when kid is unknown.
		_, err = v.jwksParser.ParseWithClaims(raw, &c, v.jwks.KeyfuncCtx(ctx))
	case !hasKid:
		return nil, fmt.Errorf("%w: token has no kid and several keys are configured", errNoKey)
	default:
		return nil, fmt.Errorf("%w: kid %q", errNoKey, truncate(kid, 64))
	}
	if err != nil {
		return nil, err
	}
	if len(v.issuers) > 0 && !v.issuers[c.Issuer] {
		return nil, fmt.Errorf("%w: issuer %q not allowed", jwt.ErrTokenInvalidIssuer, truncate(c.Issuer, 64))
	}
	if c.Sandbox == "" {
		return nil, fmt.Errorf("%w: no sbx claim", jwt.ErrTokenRequiredClaimMissing)
	}
	return &c, nil
}

// peekKID reads the kid from the token's header without verifying
// anything, to choose the key (and with it the only allowed algorithm).
func peekKID(raw string) (kid string, ok bool, err error) {
	i := strings.IndexByte(raw, '.')
	if i < 0 {
		return "", false, errors.New("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(raw[:i])
	if err != nil {
		return "", false, errors.New("header is not base64url")
	}
	var h struct {
		Kid *string `json:"kid"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", false, errors.New("header is not a JSON object with a string kid")
	}
	if h.Kid == nil {
		return "", false, nil
	}
	return *h.Kid, true, nil
}

// classify turns a parse error into an *Error. Claim errors other than
// time (aud, iss, sbx) win over time errors: a token that is both expired
// and for another audience is invalid, not expired.
func classify(err error) *Error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed), errors.Is(err, jwt.ErrTokenSignatureInvalid),
		errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, errNoKey),
		errors.Is(err, jwt.ErrTokenInvalidAudience), errors.Is(err, jwt.ErrTokenInvalidIssuer),
		errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return &Error{Reason: "invalid", kind: ErrInvalid, err: err}
	case errors.Is(err, jwt.ErrTokenExpired):
		return &Error{Reason: "expired", kind: ErrExpired, err: err}
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return &Error{Reason: "not yet valid", kind: ErrInvalid, err: err}
	}
	return &Error{Reason: "invalid", kind: ErrInvalid, err: err}
}
