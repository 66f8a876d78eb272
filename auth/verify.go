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
	if err := refuseLoose(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", jwt.ErrTokenMalformed, err)
	}
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

// refuseLoose refuses, before any key is chosen, what the JWT library
// would let through:
//   - a crit header: RFC 7515 §4.1.11 says a recipient that does not
//     understand every extension crit lists must refuse the token, and
//     we understand none;
//   - exp, nbf or iat that is not a JSON number (RFC 7519 §2, NumericDate):
//     the library reads "exp": "9999999999" as that number.
//
// The payload is decoded with encoding/json as the library decodes it
// (the same field matching), so both see the same value of each claim.
func refuseLoose(raw string) error {
	head, rest, found := strings.Cut(raw, ".")
	if !found {
		return errors.New("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return errors.New("header is not base64url")
	}
	var h struct {
		Crit json.RawMessage `json:"crit"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return errors.New("header is not a JSON object")
	}
	if h.Crit != nil {
		return errors.New("header has crit: no extension is understood here")
	}
	payload, _, _ := strings.Cut(rest, ".")
	if b, err = base64.RawURLEncoding.DecodeString(payload); err != nil {
		return errors.New("payload is not base64url")
	}
	var p struct {
		Exp json.RawMessage `json:"exp"`
		Nbf json.RawMessage `json:"nbf"`
		Iat json.RawMessage `json:"iat"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return errors.New("payload is not a JSON object")
	}
	for _, c := range [...]struct {
		name string
		v    json.RawMessage
	}{{"exp", p.Exp}, {"nbf", p.Nbf}, {"iat", p.Iat}} {
		if c.v != nil && !isJSONNumber(c.v) {
			return fmt.Errorf("%s is not a number", c.name)
		}
	}
	return nil
}

// isJSONNumber says whether v, one JSON value as encoding/json hands it
// to a RawMessage (valid, no surrounding space), is a number.
func isJSONNumber(v json.RawMessage) bool {
	return len(v) > 0 && (v[0] == '-' || '0' <= v[0] && v[0] <= '9')
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
