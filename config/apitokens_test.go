package config

import (
	"strings"
	"testing"
)

func TestAPITokens(t *testing.T) {
	t.Parallel()
	const base = "domain: preview.localhost\nadmin_token: admin-token-0123456789\nauth: {audience: a, issuers: [i], keys: [{kid: k, alg: HS256, secret: 0123456789abcdef0123456789abcdef}]}\n" +
		"templates: {app: {image: x, allow_env: [GIT_REF]}}\n"
	for _, tc := range []struct{ name, yaml, err string }{
		{"ok", "api_tokens: [{token: backend-token-0123456789, scopes: [sandboxes]}]\n", ""},
		{"short", "api_tokens: [{token: short, scopes: [sandboxes]}]\n", "5:22: api_tokens[0].token: api token is too short"},
		{"no scopes", "api_tokens: [{token: backend-token-0123456789}]\n", "needs scopes"},
		{"bad scope", "api_tokens: [{token: backend-token-0123456789, scopes: [config]}]\n", `unknown scope "config"`},
		{"same as admin", "api_tokens: [{token: admin-token-0123456789, scopes: [sandboxes]}]\n", "must differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("f.yaml", []byte(base+tc.yaml))
			if tc.err == "" {
				if err != nil || len(c.APITokens) != 1 || c.Templates["app"].AllowEnv[0] != "GIT_REF" {
					t.Fatalf("got %v, want a valid config with one token", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error containing %q", err, tc.err)
			}
		})
	}
}
