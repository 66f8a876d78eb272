package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/previewgate/previewgate/config"
)

// jwksServer serves a JWK Set that the test can swap, and counts fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	keys    []map[string]string
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T) *jwksServer {
	s := &jwksServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": s.keys})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(keys ...map[string]string) {
	s.mu.Lock()
	s.keys = keys
	s.mu.Unlock()
}

type edJWK struct {
	kid  string
	priv ed25519.PrivateKey
}

func newEdJWK(t *testing.T, kid string) edJWK {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return edJWK{kid: kid, priv: priv}
}

func (k edJWK) jwk() map[string]string {
	return map[string]string{"kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": k.kid,
		"x": base64.RawURLEncoding.EncodeToString(k.priv.Public().(ed25519.PublicKey))}
}

func (k edJWK) sign(t *testing.T, sub string) string {
	c := with(goodClaims(), "sub", sub, "iat", time.Now().Unix(), "nbf", time.Now().Unix(), "exp", time.Now().Add(time.Hour).Unix())
	return signRaw(t, jwt.SigningMethodEdDSA, k.priv, map[string]any{"kid": k.kid}, c)
}

func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t)
	old, cur := newEdJWK(t, "j-old"), newEdJWK(t, "j-new")
	srv.serve(old.jwk())

	cfg := testAuth()
	cfg.JWKSURL = srv.URL
	v, err := NewVerifier(cfg, false, withJWKSRefreshEvery(0)) // 0: no rate limit, every unknown kid refreshes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	if n := srv.fetches.Load(); n != 1 {
		t.Errorf("got %d fetches after NewVerifier, want 1", n)
	}

	if _, err := v.Check(bearerReq(old.sign(t, "u1")), "a"); err != nil {
		t.Fatalf("old key: got %v, want success", err)
	}
	// The new key is not published yet: refresh on unknown kid, still fails.
	if _, err := v.Check(bearerReq(cur.sign(t, "u1")), "a"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unpublished key: got %v, want ErrInvalid", err)
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Errorf("got %d fetches after unknown kid, want 2", n)
	}
	// Rotate: the set now holds only the new key.
	srv.serve(cur.jwk())
	if _, err := v.Check(bearerReq(cur.sign(t, "u2")), "a"); err != nil {
		t.Fatalf("new key after rotation: got %v, want success", err)
	}
	if n := srv.fetches.Load(); n != 3 {
		t.Errorf("got %d fetches after rotation, want 3", n)
	}
	// A token under the removed key that was never verified before fails.
	if _, err := v.Check(bearerReq(old.sign(t, "u3")), "a"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("removed key: got %v, want ErrInvalid", err)
	}
}

func TestJWKSRefreshRateLimited(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t)
	k := newEdJWK(t, "j1")
	srv.serve(k.jwk())
	cfg := testAuth()
	cfg.JWKSURL = srv.URL
	v, err := NewVerifier(cfg, false, withJWKSRefreshEvery(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	// Random kids: one refresh, then immediate failures without fetching.
	for i := range 5 {
		tok := newEdJWK(t, "random-"+string(rune('a'+i))).sign(t, "u")
		if _, err := v.Check(bearerReq(tok), "a"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("unknown kid %d: got %v, want ErrInvalid", i, err)
		}
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Errorf("got %d fetches, want 2 (initial + one unknown-kid refresh)", n)
	}
	if _, err := v.Check(bearerReq(k.sign(t, "u")), "a"); err != nil {
		t.Errorf("known key: got %v, want success", err)
	}
}

func TestJWKSRejectsConfusion(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t)
	k := newEdJWK(t, "j1")
	srv.serve(k.jwk())
	cfg := testAuth()
	cfg.JWKSURL = srv.URL
	v, err := NewVerifier(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	pub := []byte(k.priv.Public().(ed25519.PublicKey))
	tests := []struct {
		name string
		tok  string
	}{
		{"HS256 with the public key as secret", signRaw(t, jwt.SigningMethodHS256, pub, map[string]any{"kid": "j1"}, goodClaims())},
		{"alg none", signRaw(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, map[string]any{"kid": "j1"}, goodClaims())},
		{"no kid", signRaw(t, jwt.SigningMethodEdDSA, k.priv, map[string]any{"kid": nil}, with(goodClaims(),
			"iat", time.Now().Unix(), "nbf", time.Now().Unix(), "exp", time.Now().Add(time.Hour).Unix()))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Check(bearerReq(tc.tok), "a"); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

func TestJWKSWithStaticKeys(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t)
	k := newEdJWK(t, "j1")
	srv.serve(k.jwk())
	cfg := testAuth(hsKey)
	cfg.JWKSURL = srv.URL
	v, err := NewVerifier(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	now := time.Now()
	for name, tok := range map[string]string{
		"static": mint(t, hsKey, MintOptions{Sandbox: "a", Now: now}),
		"jwks":   k.sign(t, "u"),
	} {
		if _, err := v.Check(bearerReq(tok), "a"); err != nil {
			t.Errorf("%s: got %v, want success", name, err)
		}
	}
}

func TestJWKSUnreachableAtStart(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t)
	url := srv.URL
	srv.Close()
	cfg := testAuth(config.Key{KID: "k1", Alg: "HS256", Secret: hsKey.Secret})
	cfg.JWKSURL = url
	v, err := NewVerifier(cfg, false)
	if err != nil {
		t.Fatalf("got %v, want a verifier that retries later", err)
	}
	v.Close()
	v.Close() // idempotent
}

// withJWKSRefreshEvery sets the minimum interval between unknown-kid
// refreshes; zero means no limit.
func withJWKSRefreshEvery(d time.Duration) Option { return func(v *Verifier) { v.jwksEvery = d } }
