package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/previewgate/previewgate/config"
)

const keyDir = "../testdata/keys/"

var (
	t0 = time.Unix(1_800_000_000, 0)

	hsKey  = config.Key{KID: "k1", Alg: "HS256", Secret: "0123456789abcdef0123456789abcdef-one"}
	hsKey2 = config.Key{KID: "k2", Alg: "HS256", Secret: "0123456789abcdef0123456789abcdef-two"}
	rsKey  = config.Key{KID: "r1", Alg: "RS256", PublicKeyFile: keyDir + "rsa.pub", PrivateKeyFile: keyDir + "rsa.key"}
	esKey  = config.Key{KID: "e1", Alg: "ES256", PublicKeyFile: keyDir + "ec.pub", PrivateKeyFile: keyDir + "ec.key"}
	edKey  = config.Key{KID: "d1", Alg: "EdDSA", PublicKeyFile: keyDir + "ed25519.pub", PrivateKeyFile: keyDir + "ed25519.key"}
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testAuth(keys ...config.Key) config.Auth {
	return config.Auth{Audience: "previewgate", Issuers: []string{"app", "other-app"}, Keys: keys}
}

func newVerifier(t testing.TB, cfg config.Auth, tls bool, opts ...Option) (*Verifier, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: t0}
	v, err := NewVerifier(cfg, tls, append([]Option{withClock(clk.Now)}, opts...)...)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	t.Cleanup(v.Close)
	return v, clk
}

func mint(t testing.TB, key config.Key, o MintOptions) string {
	t.Helper()
	if o.Now.IsZero() {
		o.Now = t0
	}
	if o.Issuer == "" {
		o.Issuer = "app"
	}
	if o.Subject == "" {
		o.Subject = "user-1"
	}
	tok, err := Mint(key, o)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return tok
}

// signRaw signs arbitrary claims and header fields with any method and key,
// to build tokens Mint refuses to make.
func signRaw(t testing.TB, m jwt.SigningMethod, key any, hdr map[string]any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	for k, v := range hdr {
		if v == nil {
			delete(tok.Header, k)
		} else {
			tok.Header[k] = v
		}
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func goodClaims() jwt.MapClaims {
	return jwt.MapClaims{"sub": "user-1", "sbx": "a", "aud": "previewgate", "iss": "app",
		"iat": t0.Unix(), "nbf": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
}

func with(c jwt.MapClaims, kv ...any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func bearerReq(tok string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://sandbox-a.localhost/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

func TestBadTokens(t *testing.T) {
	t.Parallel()
	v, _ := newVerifier(t, testAuth(hsKey, rsKey, esKey, edKey), false)
	// A verifier with one RSA key accepts kid-less tokens: the classic
	// confusion target.
	single, _ := newVerifier(t, testAuth(config.Key{Alg: "RS256", PublicKeyFile: keyDir + "rsa.pub"}), false)

	rsaPub, err := os.ReadFile(keyDir + "rsa.pub")
	if err != nil {
		t.Fatal(err)
	}
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	good := mint(t, hsKey, MintOptions{Sandbox: "a", Audience: "previewgate"})
	parts := strings.Split(good, ".")
	flip := func(s string) string {
		b := []byte(s)
		if b[len(b)/2] == 'A' {
			b[len(b)/2] = 'B'
		} else {
			b[len(b)/2] = 'A'
		}
		return string(b)
	}
	otherPayload := strings.Split(mint(t, hsKey, MintOptions{Sandbox: "*", Audience: "previewgate"}), ".")[1]
	hs := func(kid string, c jwt.MapClaims) string {
		return signRaw(t, jwt.SigningMethodHS256, []byte(hsKey.Secret), map[string]any{"kid": kid}, c)
	}

	tests := []struct {
		name   string
		v      *Verifier
		token  string
		want   error
		status int
	}{
		{"alg none", v, signRaw(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, map[string]any{"kid": "k1"}, goodClaims()), ErrInvalid, 401},
		{"alg none no kid single key", single, signRaw(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil, goodClaims()), ErrInvalid, 401},
		{"HS256 with RSA public key as secret", v, signRaw(t, jwt.SigningMethodHS256, rsaPub, map[string]any{"kid": "r1"}, goodClaims()), ErrInvalid, 401},
		{"HS256 with RSA public key as secret no kid", single, signRaw(t, jwt.SigningMethodHS256, rsaPub, nil, goodClaims()), ErrInvalid, 401},
		{"expired", v, hs("k1", with(goodClaims(), "exp", t0.Add(-time.Hour).Unix())), ErrExpired, 401},
		{"expired beyond leeway", v, hs("k1", with(goodClaims(), "exp", t0.Add(-Leeway-time.Second).Unix())), ErrExpired, 401},
		{"not yet valid", v, hs("k1", with(goodClaims(), "nbf", t0.Add(time.Hour).Unix())), ErrInvalid, 401},
		{"issued in the future", v, hs("k1", with(goodClaims(), "iat", t0.Add(time.Hour).Unix())), ErrInvalid, 401},
		{"no exp", v, hs("k1", with(goodClaims(), "exp", nil)), ErrInvalid, 401},
		{"wrong aud", v, hs("k1", with(goodClaims(), "aud", "someone-else")), ErrInvalid, 401},
		{"no aud", v, hs("k1", with(goodClaims(), "aud", nil)), ErrInvalid, 401},
		{"wrong iss", v, hs("k1", with(goodClaims(), "iss", "evil")), ErrInvalid, 401},
		{"no iss", v, hs("k1", with(goodClaims(), "iss", nil)), ErrInvalid, 401},
		{"no sbx", v, hs("k1", with(goodClaims(), "sbx", nil)), ErrInvalid, 401},
		{"expired and wrong aud", v, hs("k1", with(goodClaims(), "aud", "x", "exp", t0.Add(-time.Hour).Unix())), ErrInvalid, 401},
		{"other sandbox", v, hs("k1", with(goodClaims(), "sbx", "b")), ErrForbidden, 403},
		{"tampered signature", v, parts[0] + "." + parts[1] + "." + flip(parts[2]), ErrInvalid, 401},
		{"tampered payload", v, parts[0] + "." + otherPayload + "." + parts[2], ErrInvalid, 401},
		{"unknown kid", v, hs("nope", goodClaims()), ErrInvalid, 401},
		{"no kid with several keys", v, signRaw(t, jwt.SigningMethodHS256, []byte(hsKey.Secret), map[string]any{"kid": nil}, goodClaims()), ErrInvalid, 401},
		{"empty kid", v, hs("", goodClaims()), ErrInvalid, 401},
		{"kid not a string", v, signRaw(t, jwt.SigningMethodHS256, []byte(hsKey.Secret), map[string]any{"kid": 1}, goodClaims()), ErrInvalid, 401},
		{"right kid wrong alg", v, signRaw(t, jwt.SigningMethodEdDSA, otherEd, map[string]any{"kid": "r1"}, goodClaims()), ErrInvalid, 401},
		{"EdDSA signed by another key", v, signRaw(t, jwt.SigningMethodEdDSA, otherEd, map[string]any{"kid": "d1"}, goodClaims()), ErrInvalid, 401},
		{"truncated", v, good[:len(good)-10], ErrInvalid, 401},
		{"header only", v, parts[0], ErrInvalid, 401},
		{"100 KiB token", v, parts[0] + "." + strings.Repeat("A", 100<<10) + "." + parts[2], ErrInvalid, 401},
		{"garbage", v, "garbage", ErrInvalid, 401},
		{"garbage dots", v, "a.b.c", ErrInvalid, 401},
		{"binary", v, "\x00\xff.\x01.\x02", ErrInvalid, 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.v.Check(bearerReq(tc.token), "a")
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if got := Status(err); got != tc.status {
				t.Errorf("got status %d, want %d", got, tc.status)
			}
			if strings.Contains(err.Error(), tc.token) && len(tc.token) > 8 {
				t.Errorf("error text contains the token")
			}
		})
	}
}

func TestGoodTokens(t *testing.T) {
	t.Parallel()
	v, _ := newVerifier(t, testAuth(hsKey, rsKey, esKey, edKey), false)
	single, _ := newVerifier(t, testAuth(hsKey), false)
	tests := []struct {
		name  string
		v     *Verifier
		token string
		tpl   string
	}{
		{"HS256", v, mint(t, hsKey, MintOptions{Sandbox: "a"}), ""},
		{"RS256", v, mint(t, rsKey, MintOptions{Sandbox: "a"}), ""},
		{"ES256", v, mint(t, esKey, MintOptions{Sandbox: "a"}), ""},
		{"EdDSA with template", v, mint(t, edKey, MintOptions{Sandbox: "a", Template: "nextjs"}), "nextjs"},
		{"any sandbox", v, mint(t, hsKey, MintOptions{Sandbox: "*"}), ""},
		{"second issuer", v, mint(t, hsKey, MintOptions{Sandbox: "a", Issuer: "other-app"}), ""},
		{"expired within leeway", v, signRaw(t, jwt.SigningMethodHS256, []byte(hsKey.Secret), map[string]any{"kid": "k1"},
			with(goodClaims(), "exp", t0.Add(-Leeway/2).Unix())), ""},
		{"nbf within leeway", v, signRaw(t, jwt.SigningMethodHS256, []byte(hsKey.Secret), map[string]any{"kid": "k1"},
			with(goodClaims(), "nbf", t0.Add(Leeway/2).Unix(), "iat", t0.Add(Leeway/2).Unix())), ""},
		{"aud list", v, signRaw(t, jwt.SigningMethodHS256, []byte(hsKey.Secret), map[string]any{"kid": "k1"},
			with(goodClaims(), "aud", []string{"x", "previewgate"})), ""},
		{"no kid single key", single, signRaw(t, jwt.SigningMethodHS256, []byte(hsKey.Secret), nil, goodClaims()), ""},
		{"other kid name single key", single, mint(t, hsKey, MintOptions{Sandbox: "a"}), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := tc.v.Check(bearerReq(tc.token), "a")
			if err != nil {
				t.Fatalf("got %v, want success", err)
			}
			if res.Source != FromHeader || res.Raw != tc.token {
				t.Errorf("got source %v raw match %v, want header and the token", res.Source, res.Raw == tc.token)
			}
			if res.Claims.Template != tc.tpl || res.Claims.Subject != "user-1" {
				t.Errorf("got tpl %q sub %q, want %q user-1", res.Claims.Template, res.Claims.Subject, tc.tpl)
			}
		})
	}
}

func TestAnyIssuerWhenListEmpty(t *testing.T) {
	t.Parallel()
	cfg := testAuth(hsKey)
	cfg.Issuers = nil
	v, _ := newVerifier(t, cfg, false)
	if _, err := v.Check(bearerReq(mint(t, hsKey, MintOptions{Sandbox: "a", Issuer: "whoever"})), "a"); err != nil {
		t.Fatalf("got %v, want success", err)
	}
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	oldTok := mint(t, hsKey, MintOptions{Sandbox: "a"})
	newTok := mint(t, hsKey2, MintOptions{Sandbox: "a"})

	both, _ := newVerifier(t, testAuth(hsKey, hsKey2), false)
	for name, tok := range map[string]string{"old": oldTok, "new": newTok} {
		if _, err := both.Check(bearerReq(tok), "a"); err != nil {
			t.Errorf("both keys configured, %s token: got %v, want success", name, err)
		}
	}
	// Config reload without the old key: a new Verifier, nothing cached.
	both.Close()
	onlyNew, _ := newVerifier(t, testAuth(hsKey2), false)
	if _, err := onlyNew.Check(bearerReq(oldTok), "a"); !errors.Is(err, ErrInvalid) {
		t.Errorf("old key removed, old token: got %v, want ErrInvalid", err)
	}
	if _, err := onlyNew.Check(bearerReq(newTok), "a"); err != nil {
		t.Errorf("old key removed, new token: got %v, want success", err)
	}
}

func TestCache(t *testing.T) {
	t.Parallel()
	v, clk := newVerifier(t, testAuth(hsKey), false)
	tok := mint(t, hsKey, MintOptions{Sandbox: "a", TTL: 10 * time.Minute})

	if _, err := v.Check(bearerReq(tok), "a"); err != nil {
		t.Fatalf("first check: %v", err)
	}
	if _, ok := v.cache.Peek(tok); !ok {
		t.Fatalf("token not cached after success")
	}
	// The sandbox check runs on every request, cached or not.
	if _, err := v.Check(bearerReq(tok), "b"); !errors.Is(err, ErrForbidden) {
		t.Errorf("cached token, other sandbox: got %v, want ErrForbidden", err)
	}
	// Past the cache's own max age it re-verifies (and still passes).
	clk.Add(cacheMaxAge + time.Second)
	if _, err := v.Check(bearerReq(tok), "a"); err != nil {
		t.Errorf("after cache max age: got %v, want success", err)
	}
	// Past exp+leeway the cached entry must not keep it alive.
	clk.Add(10*time.Minute + Leeway)
	if _, err := v.Check(bearerReq(tok), "a"); !errors.Is(err, ErrExpired) {
		t.Errorf("after exp: got %v, want ErrExpired", err)
	}
}

func TestFailuresNotCached(t *testing.T) {
	t.Parallel()
	v, clk := newVerifier(t, testAuth(hsKey), false)
	tok := mint(t, hsKey, MintOptions{Sandbox: "a", Now: t0.Add(5 * time.Minute)})
	if _, err := v.Check(bearerReq(tok), "a"); !errors.Is(err, ErrInvalid) || Reason(err) != "not yet valid" {
		t.Fatalf("before nbf: got %v (%q), want ErrInvalid / not yet valid", err, Reason(err))
	}
	if v.cache.Len() != 0 {
		t.Errorf("got %d cache entries after failure, want 0", v.cache.Len())
	}
	clk.Add(5 * time.Minute)
	if _, err := v.Check(bearerReq(tok), "a"); err != nil {
		t.Errorf("after nbf: got %v, want success", err)
	}
}

func TestNoKeysRejectsEverything(t *testing.T) {
	t.Parallel()
	v, _ := newVerifier(t, config.Auth{}, false)
	_, err := v.Check(bearerReq(mint(t, hsKey, MintOptions{Sandbox: "a"})), "a")
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
}

func TestNewVerifierErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		keys []config.Key
		want string
	}{
		{"duplicate kid", []config.Key{hsKey, hsKey}, "duplicate kid"},
		{"missing kid with several keys", []config.Key{{Alg: "HS256", Secret: hsKey.Secret}, hsKey2}, "kid is required"},
		{"short secret", []config.Key{{KID: "x", Alg: "HS256", Secret: "short"}}, "need at least 32"},
		{"HS384 needs 48 bytes", []config.Key{{KID: "x", Alg: "HS384", Secret: config.Secret(strings.Repeat("k", 40))}}, "need at least 48"},
		{"alg none", []config.Key{{KID: "x", Alg: "none", Secret: hsKey.Secret}}, "unsupported alg"},
		{"unknown alg", []config.Key{{KID: "x", Alg: "XS256", Secret: hsKey.Secret}}, "unsupported alg"},
		{"HMAC with key file", []config.Key{{KID: "x", Alg: "HS256", Secret: hsKey.Secret, PublicKeyFile: keyDir + "rsa.pub"}}, "not key files"},
		{"RSA with secret", []config.Key{{KID: "x", Alg: "RS256", Secret: hsKey.Secret}}, "not a secret"},
		{"RSA alg with EC key", []config.Key{{KID: "x", Alg: "RS256", PublicKeyFile: keyDir + "ec.pub"}}, "needs an RSA key"},
		{"ES256 with Ed25519 key", []config.Key{{KID: "x", Alg: "ES256", PublicKeyFile: keyDir + "ed25519.pub"}}, "needs an ECDSA key"},
		{"EdDSA with RSA key", []config.Key{{KID: "x", Alg: "EdDSA", PublicKeyFile: keyDir + "rsa.pub"}}, "needs an Ed25519 key"},
		{"missing file", []config.Key{{KID: "x", Alg: "EdDSA", PublicKeyFile: keyDir + "nope.pub"}}, "no such file"},
		{"not PEM", []config.Key{{KID: "x", Alg: "EdDSA", PublicKeyFile: keyDir + "README.md"}}, "no public key PEM block"},
		{"no key material", []config.Key{{KID: "x", Alg: "EdDSA"}}, "needs public_key_file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := NewVerifier(testAuth(tc.keys...), false)
			if err == nil {
				v.Close()
				t.Fatalf("got nil error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestPublicKeyFromPrivateKeyFile(t *testing.T) {
	t.Parallel()
	k := config.Key{KID: "d1", Alg: "EdDSA", PrivateKeyFile: keyDir + "ed25519.key"}
	v, _ := newVerifier(t, testAuth(k), false)
	if _, err := v.Check(bearerReq(mint(t, edKey, MintOptions{Sandbox: "a"})), "a"); err != nil {
		t.Fatalf("got %v, want success", err)
	}
}

func TestVerifyHonoursContext(t *testing.T) {
	t.Parallel()
	// Static keys never block; a cancelled context must not matter to them.
	v, _ := newVerifier(t, testAuth(hsKey), false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := v.verify(ctx, mint(t, hsKey, MintOptions{Sandbox: "a"})); err != nil {
		t.Fatalf("got %v, want success", err)
	}
}

// withClock injects the time source.
func withClock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }
