package gateway

import (
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestStrictTokenClaims: a client that signs (with a key the gateway
// trusts) a token the JWT library would read loosely is refused, on both
// front ends: exp, nbf or iat as a string instead of a number, and a crit
// header naming an extension nobody here understands (RFC 7515 §4.1.11).
// The same token with numeric claims and no crit is served, so what is
// refused is the looseness, not the key.
func TestStrictTokenClaims(t *testing.T) {
	t.Parallel()
	app := echoApp(t)
	now := time.Now()
	exp, iat := now.Add(time.Hour).Unix(), now.Add(-time.Minute).Unix()
	sign := func(claims jwt.MapClaims, header map[string]any) string {
		t.Helper()
		base := jwt.MapClaims{"iss": "test", "aud": "previewgate", "sub": "tester", "sbx": "abc", "exp": exp, "iat": iat}
		for k, v := range claims {
			base[k] = v
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, base)
		tok.Header["kid"] = "k1"
		for k, v := range header {
			tok.Header[k] = v
		}
		s, err := tok.SignedString([]byte(testkit.Secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		claims jwt.MapClaims
		header map[string]any
		want   int
	}{
		{"numeric", nil, nil, 200},
		{"exp a string", jwt.MapClaims{"exp": "9999999999"}, nil, 401},
		{"nbf a string", jwt.MapClaims{"nbf": "0"}, nil, 401},
		{"iat a string", jwt.MapClaims{"iat": "0"}, nil, 401},
		{"exp null", jwt.MapClaims{"exp": nil}, nil, 401},
		{"crit", nil, map[string]any{"crit": []string{"exp"}}, 401},
		{"crit of an unknown extension", nil, map[string]any{"crit": []string{"x-ext"}, "x-ext": 1}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := sign(tc.claims, tc.header)
			onBothLoops(t, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, nil,
				func(t *testing.T, cfg *config.Config, srv *httptest.Server) {
					resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok)
					body, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != tc.want {
						t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.want)
					}
					if tc.want == 200 && resp.Header.Get("Content-Type") != "application/json" {
						t.Fatalf("got %s, want the app's echo", body)
					}
				})
		})
	}
}
