package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
)

func TestMintClaims(t *testing.T) {
	t.Parallel()
	tok, err := Mint(edKey, MintOptions{Subject: "alice", Sandbox: "a", Template: "nextjs", Issuer: "app",
		Audience: "previewgate", TTL: 10 * time.Minute, Now: t0.Add(500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	var hdr, claims map[string]any
	for i, dst := range []*map[string]any{&hdr, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, dst); err != nil {
			t.Fatal(err)
		}
	}
	if hdr["alg"] != "EdDSA" || hdr["kid"] != "d1" {
		t.Errorf("got header %v, want alg EdDSA kid d1", hdr)
	}
	want := map[string]any{"sub": "alice", "sbx": "a", "tpl": "nextjs", "iss": "app", "aud": []any{"previewgate"},
		"iat": float64(t0.Unix()), "nbf": float64(t0.Unix()), "exp": float64(t0.Add(10 * time.Minute).Unix())}
	got, _ := json.Marshal(claims)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Errorf("got claims %s, want %s", got, wantJSON)
	}
}

func TestMintDefaults(t *testing.T) {
	t.Parallel()
	v, _ := newVerifier(t, config.Auth{Keys: []config.Key{hsKey}}, false)
	tok, err := Mint(hsKey, MintOptions{Sandbox: "a", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.verify(context.Background(), tok)
	if err != nil {
		t.Fatalf("got %v, want success", err)
	}
	if !c.ExpiresAt.Equal(t0.Add(DefaultTTL)) || c.Audience[0] != "previewgate" || c.Template != "" {
		t.Errorf("got exp %v aud %v tpl %q, want +%v previewgate none", c.ExpiresAt, c.Audience, c.Template, DefaultTTL)
	}
}

func TestMintErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  config.Key
		o    MintOptions
		want string
	}{
		{"no sandbox", hsKey, MintOptions{}, "sandbox is required"},
		{"negative ttl", hsKey, MintOptions{Sandbox: "a", TTL: -time.Second}, "negative ttl"},
		{"alg none", config.Key{Alg: "none"}, MintOptions{Sandbox: "a"}, "unsupported alg"},
		{"short secret", config.Key{Alg: "HS256", Secret: "short"}, MintOptions{Sandbox: "a"}, "need at least 32"},
		{"HS512 needs 64 bytes", config.Key{Alg: "HS512", Secret: config.Secret(strings.Repeat("k", 40))}, MintOptions{Sandbox: "a"}, "need at least 64"},
		{"public key only", config.Key{KID: "r", Alg: "RS256", PublicKeyFile: keyDir + "rsa.pub"}, MintOptions{Sandbox: "a"}, "no private_key_file"},
		{"key type mismatch", config.Key{Alg: "EdDSA", PrivateKeyFile: keyDir + "rsa.key"}, MintOptions{Sandbox: "a"}, "needs an Ed25519 key"},
		{"public key as private", config.Key{Alg: "EdDSA", PrivateKeyFile: keyDir + "ed25519.pub"}, MintOptions{Sandbox: "a"}, "no private key PEM block"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Mint(tc.key, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestNewDevKey(t *testing.T) {
	t.Parallel()
	k1, k2 := NewDevKey(), NewDevKey()
	if k1.Secret == k2.Secret || k1.KID == k2.KID {
		t.Errorf("two dev keys are equal")
	}
	if k1.Alg != "HS256" || len(k1.Secret) < config.HMACMinLen("HS256") || !strings.HasPrefix(k1.KID, "dev-") {
		t.Errorf("got %s kid %q secret %d bytes, want HS256 dev-… ≥%d", k1.Alg, k1.KID, len(k1.Secret), config.HMACMinLen("HS256"))
	}
	v, _ := newVerifier(t, config.Auth{Keys: []config.Key{k1}}, false)
	tok, err := Mint(k1, MintOptions{Sandbox: "demo", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/?access_token="+tok, nil)
	if res, err := v.Check(r, "demo"); err != nil || res.Source != FromQuery {
		t.Fatalf("got %v/%v, want query success", res.Source, err)
	}
}

// TestCheckKeyTypeKnowsEveryAlgorithm: every asymmetric algorithm config
// names has a key type here (#14: config holds the one list), and an ES*
// algorithm insists on its own curve.
func TestCheckKeyTypeKnowsEveryAlgorithm(t *testing.T) {
	t.Parallel()
	for _, alg := range append(slices.Clone(config.JWKSAlgorithms), config.Algorithms...) {
		if config.IsHMAC(alg) {
			continue
		}
		if err := checkKeyType(alg, struct{}{}); err == nil || !strings.Contains(err.Error(), "needs an") {
			t.Errorf("checkKeyType(%s, struct{}{}) = %v, want a wrong-key-type error", alg, err)
		}
	}
	for _, alg := range []string{"HS256", "none", "XS256"} {
		if err := checkKeyType(alg, struct{}{}); err == nil || !strings.Contains(err.Error(), "unsupported alg") {
			t.Errorf("checkKeyType(%s) = %v, want unsupported alg", alg, err)
		}
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkKeyType("ES256", p256); err != nil {
		t.Errorf("ES256 with a P-256 key: %v", err)
	}
	if err := checkKeyType("ES384", &p256.PublicKey); err == nil || !strings.Contains(err.Error(), "needs curve P-384") {
		t.Errorf("ES384 with a P-256 key: got %v, want needs curve P-384", err)
	}
}
