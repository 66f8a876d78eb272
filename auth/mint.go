package auth

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/previewgate/previewgate/config"
)

// DefaultTTL is the lifetime of a minted token when MintOptions.TTL is zero.
const DefaultTTL = 15 * time.Minute

// MintOptions describes a token to mint.
type MintOptions struct {
	Subject, Sandbox, Template, Issuer, Audience string
	TTL                                          time.Duration // Zero means DefaultTTL.
	// Now is the issue time (iat and nbf); exp is Now+TTL. Zero means
	// time.Now().
	Now time.Time
}

// Mint signs a token with key (must hold a secret or a private key).
//
// Claims: sub (if set), sbx, tpl (if set), aud (zero means "previewgate"),
// iss (if set), iat = nbf = now, exp = now+TTL, all in whole seconds; the
// header carries kid when key.KID is set. HS* keys sign with Secret, the
// others with PrivateKeyFile (PEM: PKCS#8, PKCS#1 or SEC 1).
func Mint(key config.Key, o MintOptions) (string, error) {
	if o.Sandbox == "" {
		return "", errors.New("mint: sandbox is required")
	}
	if o.TTL < 0 {
		return "", errors.New("mint: negative ttl")
	}
	method := jwt.GetSigningMethod(key.Alg)
	if method == nil || key.Alg == "none" {
		return "", fmt.Errorf("mint: unsupported alg %q", key.Alg)
	}
	var signer any
	if config.IsHMAC(key.Alg) {
		if n := config.HMACMinLen(key.Alg); len(key.Secret) < n {
			return "", fmt.Errorf("mint: %s secret is %d bytes, need at least %d", key.Alg, len(key.Secret), n)
		}
		signer = []byte(key.Secret)
	} else {
		if key.PrivateKeyFile == "" {
			return "", fmt.Errorf("mint: key %q has no private_key_file", key.KID)
		}
		s, err := loadPrivateKey(key.PrivateKeyFile)
		if err != nil {
			return "", fmt.Errorf("mint: %w", err)
		}
		if err := checkKeyType(key.Alg, s); err != nil {
			return "", fmt.Errorf("mint: %w", err)
		}
		signer = s
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.Truncate(time.Second)
	ttl := cmp.Or(o.TTL, DefaultTTL)
	aud := cmp.Or(o.Audience, config.DefaultAudience)
	c := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   o.Subject,
			Issuer:    o.Issuer,
			Audience:  jwt.ClaimStrings{aud},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
		Sandbox:  o.Sandbox,
		Template: o.Template,
	}
	t := jwt.NewWithClaims(method, c)
	if key.KID != "" {
		t.Header["kid"] = key.KID
	}
	s, err := t.SignedString(signer)
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	return s, nil
}

// NewDevKey returns a fresh random HS256 key (32 random bytes, base64url
// encoded as the secret) with kid "dev-<8 hex>", for development setups.
func NewDevKey() config.Key {
	b := make([]byte, 36)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return config.Key{
		KID:    "dev-" + hex.EncodeToString(b[32:]),
		Alg:    "HS256",
		Secret: config.Secret(base64.RawURLEncoding.EncodeToString(b[:32])),
	}
}
