package config

import (
	"errors"
	"strings"
	"testing"
)

// TestAllErrorsInOnePass: a typo'd key (a decode error), a short secret
// and an out-of-range cpus (validation errors) are all reported at once,
// in file order, each FILE:LINE:COL (#14; it took three rounds before).
func TestAllErrorsInOnePass(t *testing.T) {
	t.Parallel()
	src := `domain: preview.localhost
auth:
  keys: [{kid: k1, alg: HS256, secret: short}]
templates:
  web:
    image: nginx
    memroy: 1GiB
    cpus: 2000
    port: "80"
`
	_, err := parse("all.yaml", []byte(src), env(nil))
	want := `all.yaml:3:40: auth.keys[0].secret: secret for HS256 must be at least 32 bytes, got 5
all.yaml:7:5: templates.web: unknown key "memroy" (did you mean "memory"?)
all.yaml:8:11: templates.web.cpus: cpus 2000 out of range 0.01-1024
all.yaml:9:11: templates.web.port: expected an integer, got a string`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

// TestDecodeErrorShadowsItsValidation: a value that failed to decode is not
// reported a second time by validation at the same place.
func TestDecodeErrorShadowsItsValidation(t *testing.T) {
	t.Parallel()
	_, err := parse("s.yaml", []byte("domain: ${NOPE_DOMAIN}\nauth: {jwks_url: \"https://a.example.com/j\"}\n"), env(nil))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("got %v, want exactly one error", err)
	}
	if want := "s.yaml:1:9: domain: environment variable NOPE_DOMAIN is not set"; list[0].Error() != want {
		t.Errorf("got %q, want %q", list[0].Error(), want)
	}
}

// TestUnsetSecretVariableIsOneError: an HS256 key whose quoted
// secret: "${VAR}" names an unset variable (the shipped deploy/config.yaml
// validated without its environment) is one error at the variable, not
// also "alg HS256 needs a secret" pointing at alg.
func TestUnsetSecretVariableIsOneError(t *testing.T) {
	t.Parallel()
	_, err := parse("s.yaml", []byte("domain: preview.localhost\nauth:\n  keys:\n    - {kid: k1, alg: HS256, secret: \"${NOPE_SECRET}\"}\n"), env(nil))
	want := "s.yaml:4:38: auth.keys[0].secret: environment variable NOPE_SECRET is not set"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

// TestSyntaxErrorStops: a syntax error is the only error reported; what
// follows it cannot be read reliably.
func TestSyntaxErrorStops(t *testing.T) {
	t.Parallel()
	_, err := parse("x.yaml", []byte(base+"log: {level: info\nlimits: {max_running: -1}\n"), env(nil))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 || !strings.HasPrefix(list[0].Msg, "invalid YAML") {
		t.Errorf("got %v, want one syntax error", err)
	}
}
