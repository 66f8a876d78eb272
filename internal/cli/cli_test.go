package cli

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/app"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

func TestConfigValidateCLI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte(`domain: preview.localhost
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: app:1}
`), 0o600)
	os.WriteFile(bad, []byte(`domain: preview.localhost
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: app:1, idle_timeout: soon}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"config", "validate", good}, &out, &errb); code != 0 {
		t.Fatalf("valid file: exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"config", "validate", bad}, &out, &errb); code != 1 {
		t.Fatalf("invalid file: exit %d, want 1", code)
	}
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(bad) + `:5:\d+: `).MatchString(errb.String()) {
		t.Fatalf("got %q, want FILE:LINE:COL: message", errb.String())
	}
}

// TestConfigValidateCLIAllErrors: config validate prints every error of
// the file in one run, one FILE:LINE:COL: message per line, in file order
// (#14).
func TestConfigValidateCLIAllErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte(`domain: preview.localhost
auth:
  keys: [{kid: k1, alg: HS256, secret: short}]
templates:
  app: {image: app:1, cpus: 2000}
limts: {}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"config", "validate", bad}, &out, &errb); code != 1 {
		t.Fatalf("invalid file: exit %d, want 1", code)
	}
	want := bad + ":3:40: auth.keys[0].secret: secret for HS256 must be at least 32 bytes, got 5\n" +
		bad + ":5:29: templates.app.cpus: cpus 2000 out of range 0.01-1024\n" +
		bad + ":6:1: unknown key \"limts\" (did you mean \"limits\"?)\n"
	if errb.String() != want {
		t.Errorf("got\n%s\nwant\n%s", errb.String(), want)
	}
}

func TestTokenMintCLI(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(`domain: preview.localhost
auth:
  audience: previewgate
  issuers: [backend]
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: app:1}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"token", "mint", "--config", cfg, "--sandbox", "abc", "--template", "app"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var claims jwt.MapClaims
	tok, err := jwt.ParseWithClaims(strings.TrimSpace(out.String()), &claims, func(*jwt.Token) (any, error) {
		return []byte("0123456789abcdef0123456789abcdef"), nil
	}, jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience("previewgate"), jwt.WithIssuer("backend"))
	if err != nil || !tok.Valid {
		t.Fatalf("minted token does not verify: %v", err)
	}
	if claims["sbx"] != "abc" || claims["tpl"] != "app" || tok.Header["kid"] != "k1" {
		t.Fatalf("got claims %v header %v", claims, tok.Header)
	}
	if code := run([]string{"token", "mint", "--config", cfg, "--sandbox", "Bad_Id"}, &out, &errb); code != 1 {
		t.Fatalf("malformed sandbox id: exit %d, want 1", code)
	}
	// A template the config lacks: its token's first request would answer
	// 400 unknown_template; mint says so instead of signing it.
	out.Reset()
	errb.Reset()
	if code := run([]string{"token", "mint", "--config", cfg, "--sandbox", "abc", "--template", "ap"}, &out, &errb); code != 1 ||
		out.Len() > 0 || !strings.Contains(errb.String(), "no such template in the config (templates: app)") {
		t.Fatalf("unknown template: exit %d, stdout %q, stderr %q; want 1 naming the templates", code, out.String(), errb.String())
	}
}

// TestHelp: every command answers --help with its usage on stdout and exit
// 0; a command line it cannot read exits 2 with the usage on stderr (#16:
// `config validate --help` read a file named --help, `token --help`,
// `config --help` and `--version` were unknown commands, help exited 2,
// and the usage did not show serve's --label).
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout (code 0) or stderr
	}{
		{[]string{"--help"}, 0, "serve [--config FILE]"},
		{[]string{"-h"}, 0, "--label KEY=VALUE"},
		{[]string{"help"}, 0, "token mint --sandbox ID"},
		{[]string{"--version"}, 0, "previewgate " + version},
		{[]string{"version"}, 0, "previewgate " + version},
		{[]string{"config", "--help"}, 0, "config validate [FILE]"},
		{[]string{"config", "validate", "--help"}, 0, "usage: previewgate config validate [FILE]"},
		{[]string{"config", "validate", "-h"}, 0, "usage: previewgate config validate [FILE]"},
		{[]string{"token", "--help"}, 0, "token mint --sandbox ID"},
		{[]string{"token", "mint", "--help"}, 0, "-sandbox"},
		{[]string{"serve", "--help"}, 0, "-label key=value"},
		{[]string{"ca", "--help"}, 0, "ca export"},
		{[]string{"healthcheck", "--help"}, 0, "-url"},
		{nil, 2, "usage:"},
		{[]string{"config"}, 2, "config validate [FILE]"},
		{[]string{"config", "frobnicate"}, 2, `unknown command "config frobnicate"`},
		{[]string{"token"}, 2, "token mint"},
		{[]string{"config", "validate"}, 2, "usage: previewgate config validate [FILE]"},
		{[]string{"config", "validate", "a.yaml", "b.yaml"}, 2, "usage: previewgate config validate [FILE]"},
		{[]string{"token", "mint", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		where := out.String()
		if tc.code != 0 {
			where = errb.String()
			if out.Len() > 0 {
				t.Errorf("%q: stdout %q, want nothing", tc.args, out.String())
			}
		} else if errb.Len() > 0 {
			t.Errorf("%q: stderr %q, want nothing", tc.args, errb.String())
		}
		if code != tc.code || !strings.Contains(where, tc.out) {
			t.Errorf("%q: exit %d, output %q; want exit %d and %q", tc.args, code, where, tc.code, tc.out)
		}
	}
}

// TestConfigInit: config init writes a private starter config that
// validates as written, with fresh secrets each time, and never
// overwrites a file (#16).
func TestConfigInit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	for _, p := range []string{a, b} {
		var out, errb bytes.Buffer
		if code := run([]string{"config", "init", p}, &out, &errb); code != 0 {
			t.Fatalf("config init %s: exit %d, %s", p, code, errb.String())
		}
		if !strings.Contains(out.String(), "serve --config "+p) {
			t.Errorf("got %q, want the serve command", out.String())
		}
		if code := run([]string{"config", "validate", p}, &out, &errb); code != 0 {
			t.Fatalf("config validate of the starter: exit %d, %s", code, errb.String())
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("mode: got %v %v, want 0600", fi.Mode(), err)
		}
	}
	ca, err := config.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := config.Load(b)
	if ca.Auth.Keys[0].Secret == cb.Auth.Keys[0].Secret || ca.AdminToken == cb.AdminToken ||
		len(ca.Auth.Keys[0].Secret) < 32 || len(ca.AdminToken) < 16 {
		t.Errorf("secrets not fresh or too short: %d/%d bytes", len(ca.Auth.Keys[0].Secret), len(ca.AdminToken))
	}
	// A backend gets its own token, limited to the sandboxes (#24, 4).
	if len(ca.APITokens) != 1 || !slices.Equal(ca.APITokens[0].Scopes, []string{config.APIScopeSandboxes}) ||
		len(ca.APITokens[0].Token) < 16 || ca.APITokens[0].Token == ca.AdminToken ||
		len(cb.APITokens) != 1 || ca.APITokens[0].Token == cb.APITokens[0].Token {
		t.Errorf("got api_tokens %d, want one fresh token with scopes [sandboxes]", len(ca.APITokens))
	}
	if ca.Template("").Image != config.DemoImage { // serve builds it
		t.Errorf("starter template image %q, want the demo image the gateway builds", ca.Template("").Image)
	}
	before, _ := os.ReadFile(a)
	var out, errb bytes.Buffer
	if code := run([]string{"config", "init", a}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "exists") {
		t.Errorf("init over a file: exit %d %q, want 1 and \"exists\"", code, errb.String())
	}
	if after, _ := os.ReadFile(a); !bytes.Equal(before, after) {
		t.Error("init over a file changed it")
	}
	out.Reset()
	if code := run([]string{"config", "init", "-"}, &out, &errb); code != 0 {
		t.Fatalf("config init -: exit %d", code)
	}
	if _, err := config.Parse("stdout", out.Bytes()); err != nil {
		t.Errorf("config init - printed an invalid config: %v", err)
	}
}

// TestTokenMintNeedsOnlyKeys: token mint --config signs when variables
// the token does not need (admin_token's) are unset, and names the
// variable when the key itself lacks one (#16: it demanded
// PREVIEWGATE_ADMIN_TOKEN).
func TestTokenMintNeedsOnlyKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(`domain: preview.localhost
admin_token: ${PG_TEST_NEVER_SET_ADMIN}
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: app:1}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"token", "mint", "--config", good, "--sandbox", "abc"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if _, err := jwt.Parse(strings.TrimSpace(out.String()), func(*jwt.Token) (any, error) {
		return []byte("0123456789abcdef0123456789abcdef"), nil
	}); err != nil {
		t.Errorf("token does not verify: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`domain: preview.localhost
auth:
  keys: [{kid: k1, alg: HS256, secret: "${PG_TEST_NEVER_SET_SECRET}"}]
templates:
  app: {image: app:1}
`), 0o600)
	out.Reset()
	if code := run([]string{"token", "mint", "--config", bad, "--sandbox", "abc"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "PG_TEST_NEVER_SET_SECRET") || out.Len() > 0 {
		t.Errorf("key from an unset variable: exit %d, %q; want 1 naming the variable", code, errb.String())
	}
}

// TestTokenMintDevKey: without --config, token mint signs with the key
// the development default keeps in ./previewgate-data, and says so; with
// no such key it says what to do (#16: it refused, so no second sandbox
// could be opened).
func TestTokenMintDevKey(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv(configEnv, "")
	var out, errb bytes.Buffer
	if code := run([]string{"token", "mint", "--sandbox", "other"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), filepath.Join("previewgate-data", "dev-key.json")) {
		t.Fatalf("no dev key: exit %d %q, want 1 naming previewgate-data/dev-key.json", code, errb.String())
	}
	cfg, dev, err := app.Load("") // what serve does on the development default
	if err != nil || !dev {
		t.Fatal(err)
	}
	key := cfg.Auth.Keys[0]
	errb.Reset()
	if code := run([]string{"token", "mint", "--sandbox", "other"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "development key in ") {
		t.Errorf("stderr %q, want it to say which key signed", errb.String())
	}
	// A mint that fails signs nothing, and says nothing was signed.
	out.Reset()
	errb.Reset()
	if code := run([]string{"token", "mint", "--sandbox", "other", "--ttl", "-5m"}, &out, &errb); code == 0 ||
		strings.Contains(errb.String(), "signed with") || out.Len() > 0 {
		t.Errorf("--ttl -5m: exit %d, stdout %q, stderr %q; want a failure that claims no signature", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"token", "mint", "--sandbox", "other"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var claims jwt.MapClaims
	tok, err := jwt.ParseWithClaims(strings.TrimSpace(out.String()), &claims, func(*jwt.Token) (any, error) {
		return []byte(key.Secret), nil
	}, jwt.WithValidMethods([]string{"HS256"}), jwt.WithAudience(cfg.Auth.Audience), jwt.WithIssuer(cfg.Auth.Issuers[0]))
	if err != nil || claims["sbx"] != "other" || tok.Header["kid"] != key.KID {
		t.Fatalf("token: %v claims %v header %v", err, claims, tok.Header)
	}
	// A second start of the development default keeps the key.
	again, _, err := app.Load("")
	if err != nil || again.Auth.Keys[0] != key {
		t.Errorf("restart: got key %q (%v), want the kept %q", again.Auth.Keys[0].KID, err, key.KID)
	}
}

// TestServeFlags: --http, --https, --admin and --domain win over the
// development default and a file; bad values are a usage error (exit 2).
func TestServeFlags(t *testing.T) {
	t.Parallel()
	f, err := parseServeFlags([]string{"--http", "127.0.0.1:18580", "--https", ":8443", "--admin", "127.0.0.1:19580", "--domain", "Preview.Test.", "--label", "a=b"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	f.Overrides.Apply(c)
	if c.Listen.HTTP != "127.0.0.1:18580" || c.Listen.HTTPS != ":8443" || c.Listen.Admin != "127.0.0.1:19580" ||
		!slices.Equal(c.Domains, []string{"preview.test"}) || f.Labels["a"] != "b" {
		t.Errorf("got listen %+v domains %v labels %v", c.Listen, c.Domains, f.Labels)
	}
	f, _ = parseServeFlags([]string{"--admin", "127.0.0.1:19581"}, io.Discard, io.Discard)
	c = config.Default()
	f.Overrides.Apply(c)
	if c.Listen.HTTP != config.DevListenHTTP || c.Listen.Admin != "127.0.0.1:19581" || c.Domains[0] != config.DevDomain {
		t.Errorf("unset flags changed the config: %+v %v", c.Listen, c.Domains)
	}
	for _, args := range [][]string{{"--http", "8080"}, {"--admin", "127.0.0.1:70000"}, {"--domain", "*.preview.localhost"}, {"--domain", "a b"}, {"extra"}} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"serve"}, args...), &out, &errb); code != 2 || !strings.Contains(errb.String(), "serve") {
			t.Errorf("serve %q: exit %d %q, want 2", args, code, errb.String())
		}
	}
}

// TestHealthcheckAsksConfiguredAdmin: healthcheck asks listen.admin of
// --config or $PREVIEWGATE_CONFIG (a wildcard host dialled on loopback),
// with variables it does not need unset (#16: it always asked
// 127.0.0.1:9090).
func TestHealthcheckAsksConfiguredAdmin(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(`domain: preview.localhost
listen: {admin: ":`+port+`"}
admin_token: ${PG_TEST_NEVER_SET_ADMIN}
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: app:1}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"healthcheck", "--config", cfg}, &out, &errb); code != 0 {
		t.Errorf("--config: exit %d %s", code, errb.String())
	}
	t.Setenv("PREVIEWGATE_CONFIG", cfg)
	if code := run([]string{"healthcheck"}, &out, &errb); code != 0 {
		t.Errorf("$PREVIEWGATE_CONFIG: exit %d %s", code, errb.String())
	}
	// $PREVIEWGATE_ADMIN_ADDR moves serve's admin listener, and the health
	// check (a separate process in a container) follows it, even where
	// $PREVIEWGATE_CONFIG names another address or no file at all; an
	// explicit --config still wins.
	t.Setenv("PREVIEWGATE_CONFIG", filepath.Join(t.TempDir(), "absent.yaml"))
	t.Setenv(adminEnv, "127.0.0.1:"+port)
	errb.Reset()
	if code := run([]string{"healthcheck"}, &out, &errb); code != 0 {
		t.Errorf("$%s: exit %d %s", adminEnv, code, errb.String())
	}
	if f, err := parseServeFlags(nil, &out, &errb); err != nil || f.Overrides.Admin != "127.0.0.1:"+port {
		t.Errorf("serve with $%s: admin %q, %v; want the variable's address", adminEnv, f.Overrides.Admin, err)
	}
	t.Setenv(adminEnv, testkit.DeadAddr(t))
	if code := run([]string{"healthcheck", "--config", cfg}, &out, &errb); code != 0 {
		t.Errorf("explicit --config with $%s set elsewhere: exit %d %s", adminEnv, code, errb.String())
	}
	// A value that is no address (a token pasted into the wrong variable)
	// is refused without being repeated.
	const pasted = "a-secret-token-pasted-here"
	t.Setenv(adminEnv, pasted)
	errb.Reset()
	if code := run([]string{"healthcheck"}, &out, &errb); code != 1 || strings.Contains(errb.String(), pasted) || !strings.Contains(errb.String(), adminEnv) {
		t.Errorf("healthcheck with a bad $%s: exit %d %q, want 1 naming the variable, not its value", adminEnv, code, errb.String())
	}
	if _, err := parseServeFlags(nil, &out, &errb); err == nil || strings.Contains(err.Error(), pasted) {
		t.Errorf("serve with a bad $%s: %v, want an error without the value", adminEnv, err)
	}
	errb.Reset()
	if code := run([]string{"healthcheck", "--url", "http://" + srv.Listener.Addr().String() + "/nope"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "404") {
		t.Errorf("--url to a 404: exit %d %q, want 1", code, errb.String())
	}
}

// TestConfigValidateWarnsMissingImage: a template whose image the Docker
// engine lacks passes validation with a warning naming it, instead of
// failing at its first request (#16).
func TestConfigValidateWarnsMissingImage(t *testing.T) {
	dockertest.Client(t) // fails clearly without an engine
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(`domain: preview.localhost
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: "previewgate-test-missing:nope"}
  demo: {image: "`+config.DemoImage+`"}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"config", "validate", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q; want 0 (a warning, not an error)", code, errb.String())
	}
	want := path + ": warning: template app: image previewgate-test-missing:nope is not on the Docker engine"
	if !strings.Contains(errb.String(), want) {
		t.Fatalf("stderr %q, want it to contain %q", errb.String(), want)
	}
	// serve builds the demo image itself: never a warning, whether or not
	// the engine has it now (the engine may have it from another test, so
	// the list checked is what must leave it out).
	if strings.Contains(errb.String(), config.DemoImage) {
		t.Errorf("stderr %q warns about the demo image, which serve builds", errb.String())
	}
}

// TestConfigValidateNestingBomb: the CLI refuses #13's config bomb (200 KB
// of "[") with a FILE:LINE:COL error, as the admin API does, instead of
// running out of memory.
func TestConfigValidateNestingBomb(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bomb.yaml")
	if err := os.WriteFile(path, []byte(strings.Repeat("[", 200_000)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"config", "validate", path}, &out, &errb)
	if want := path + ":1:33: "; code != 1 || !strings.Contains(errb.String(), want) {
		t.Fatalf("exit %d, stderr %q; want 1 and an error at %q", code, errb.String(), want)
	}
}
