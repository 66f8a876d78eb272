package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/golang-jwt/jwt/v5"

	"github.com/previewgate/previewgate/config"
)

const minRSABits = 2048

// staticKey is one configured key with its own parser: the parser's
// allow-list holds only the key's algorithm, so a token cannot pick another.
type staticKey struct {
	kid    string
	alg    string
	key    any // []byte, *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	parser *jwt.Parser
}

// keyfunc hands out the key only for its own algorithm (the parser already
// enforces that; this is the second lock on the same door).
func (k *staticKey) keyfunc(t *jwt.Token) (any, error) {
	if t.Method == nil || t.Method.Alg() != k.alg {
		return nil, fmt.Errorf("algorithm not allowed for kid %q", k.kid)
	}
	return k.key, nil
}

func (v *Verifier) parserFor(algs ...string) *jwt.Parser {
	return jwt.NewParser(
		jwt.WithValidMethods(algs),
		jwt.WithAudience(v.aud),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(v.now),
	)
}

func (v *Verifier) newStaticKey(k config.Key) (*staticKey, error) {
	key, err := verifyKey(k)
	if err != nil {
		return nil, err
	}
	return &staticKey{kid: k.KID, alg: k.Alg, key: key, parser: v.parserFor(k.Alg)}, nil
}

// verifyKey loads the verification key of k and checks it fits k.Alg.
func verifyKey(k config.Key) (any, error) {
	if jwt.GetSigningMethod(k.Alg) == nil || k.Alg == "none" {
		return nil, fmt.Errorf("unsupported alg %q", k.Alg)
	}
	if config.IsHMAC(k.Alg) {
		if k.PublicKeyFile != "" || k.PrivateKeyFile != "" {
			return nil, fmt.Errorf("%s takes a secret, not key files", k.Alg)
		}
		if n := config.HMACMinLen(k.Alg); len(k.Secret) < n {
			return nil, fmt.Errorf("%s secret is %d bytes, need at least %d", k.Alg, len(k.Secret), n)
		}
		return []byte(k.Secret), nil
	}
	if k.Secret != "" {
		return nil, fmt.Errorf("%s takes public_key_file, not a secret", k.Alg)
	}
	var pub crypto.PublicKey
	switch {
	case k.PublicKeyFile != "":
		data, err := os.ReadFile(k.PublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		if pub, err = ParsePublicKeyPEM(data); err != nil {
			return nil, fmt.Errorf("public key %s: %w", k.PublicKeyFile, err)
		}
	case k.PrivateKeyFile != "":
		priv, err := loadPrivateKey(k.PrivateKeyFile)
		if err != nil {
			return nil, err
		}
		pub = priv.Public()
	default:
		return nil, fmt.Errorf("%s needs public_key_file", k.Alg)
	}
	if err := checkKeyType(k.Alg, pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// checkKeyType reports whether key (public or private) fits alg. The
// algorithms it accepts are config.JWKSAlgorithms, the one list of
// asymmetric algorithms (#14); the key type each needs comes from the JWT
// library's signing method for it, not from a list of names here.
func checkKeyType(alg string, key any) error {
	if s, ok := key.(crypto.Signer); ok {
		key = s.Public()
	}
	if !slices.Contains(config.JWKSAlgorithms, alg) {
		return fmt.Errorf("unsupported alg %q", alg)
	}
	switch m := jwt.GetSigningMethod(alg).(type) {
	case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS:
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return fmt.Errorf("%s needs an RSA key, got %T", alg, key)
		}
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("%s key is %d bits, need at least %d", alg, k.N.BitLen(), minRSABits)
		}
	case *jwt.SigningMethodECDSA:
		k, ok := key.(*ecdsa.PublicKey)
		if !ok {
			return fmt.Errorf("%s needs an ECDSA key, got %T", alg, key)
		}
		want := curveOfSize[m.CurveBits]
		if want == nil {
			return fmt.Errorf("unsupported alg %q: no curve of %d bits", alg, m.CurveBits)
		}
		if k.Curve != want {
			return fmt.Errorf("%s needs curve %s, got %s", alg, want.Params().Name, k.Curve.Params().Name)
		}
	case *jwt.SigningMethodEd25519:
		if _, ok := key.(ed25519.PublicKey); !ok {
			return fmt.Errorf("%s needs an Ed25519 key, got %T", alg, key)
		}
	default:
		return fmt.Errorf("unsupported alg %q", alg)
	}
	return nil
}

// curveOfSize is the NIST curve an ES* signing method names by its
// CurveBits.
var curveOfSize = map[int]elliptic.Curve{256: elliptic.P256(), 384: elliptic.P384(), 521: elliptic.P521()}

// ParsePublicKeyPEM reads the first public key in PEM data: PKIX "PUBLIC
// KEY", PKCS#1 "RSA PUBLIC KEY", or the key of a "CERTIFICATE".
func ParsePublicKeyPEM(data []byte) (crypto.PublicKey, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no public key PEM block")
		}
		switch b.Type {
		case "PUBLIC KEY":
			return x509.ParsePKIXPublicKey(b.Bytes)
		case "RSA PUBLIC KEY":
			return x509.ParsePKCS1PublicKey(b.Bytes)
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, err
			}
			return c.PublicKey, nil
		}
	}
}

// ParsePrivateKeyPEM reads the first private key in PEM data: PKCS#8
// "PRIVATE KEY" (RSA, ECDSA, Ed25519), PKCS#1 "RSA PRIVATE KEY" or SEC 1
// "EC PRIVATE KEY". Encrypted keys are not supported.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no private key PEM block")
		}
		var key any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("encrypted private keys are not supported")
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		return s, nil
	}
}

func loadPrivateKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	s, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	return s, nil
}

// KeyFileProblems reads every key file the gateway reads of a's keys (a
// public_key_file, else a private_key_file), as it does when it loads
// them, and reports what would stop it: a missing or unreadable file, a
// key that does not fit its alg. JWKS endpoints are not fetched.
func KeyFileProblems(a config.Auth) []config.FileProblem {
	var out []config.FileProblem
	for i, k := range a.Keys {
		at := fmt.Sprintf("auth.keys[%d].", i)
		if config.IsHMAC(k.Alg) {
			continue // a secret, no file
		}
		if _, err := verifyKey(k); err != nil {
			field := "public_key_file"
			if k.PublicKeyFile == "" {
				field = "private_key_file"
			}
			out = append(out, config.FileProblem{Path: at + field, Err: err})
		}
	}
	return out
}

// MintKeyProblems reports the private_key_file beside a public_key_file
// that cannot be loaded: only `token mint` reads it, so it stops no
// gateway, but minting with that key would fail.
func MintKeyProblems(a config.Auth) []config.FileProblem {
	var out []config.FileProblem
	for i, k := range a.Keys {
		if config.IsHMAC(k.Alg) || k.PublicKeyFile == "" || k.PrivateKeyFile == "" {
			continue
		}
		if _, err := loadPrivateKey(k.PrivateKeyFile); err != nil {
			out = append(out, config.FileProblem{Path: fmt.Sprintf("auth.keys[%d].private_key_file", i), Err: err})
		}
	}
	return out
}
