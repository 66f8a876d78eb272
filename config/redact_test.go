package config

import (
	"bytes"
	"strings"
	"testing"
)

// liveSrc is a running config's file: secrets by reference and literal,
// env values by reference and literal, some awkward to quote.
const liveSrc = `domain: preview.localhost
admin_token: ${ADMIN}
auth:
  keys:
    - {kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}
    - {kid: k2, alg: HS256, secret: "${K2_SECRET}"}
templates:
  web:
    image: nginx
    env:
      DATABASE_URL: ${DB}
      NODE_ENV: development
      ODD: "a \"quoted\" \\ back\nslash $${NOT_A_VAR} é \t"
      EMPTY: ""
`

var liveEnv = map[string]string{
	"ADMIN":      "admin-token-from-the-environment",
	"K2_SECRET":  "fedcba9876543210fedcba9876543210",
	"DB":         "postgres://user:hunter2@db/app",
	"NEW_SECRET": "a-new-secret-value-0123456789abcdef",
}

func liveConfig(t *testing.T) *Config {
	t.Helper()
	c, err := parse("live.yaml", []byte(liveSrc), env(liveEnv))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRedactedHidesSecretsAndEnv: GET /admin/config shows no secret and no
// env value (#13).
func TestRedactedHidesSecretsAndEnv(t *testing.T) {
	t.Parallel()
	c := liveConfig(t)
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{liveEnv["ADMIN"], liveEnv["K2_SECRET"], liveEnv["DB"], "0123456789abcdef", "development", "quoted"} {
		if bytes.Contains(out, []byte(v)) {
			t.Errorf("redacted output contains %q:\n%s", v, out)
		}
	}
	if !bytes.Contains(out, []byte("EMPTY: \"\"")) {
		t.Errorf("an empty env value should show as empty:\n%s", out)
	}
}

// TestParseUpdateRoundTrip: the GET output sent back as is applies
// unchanged, and the file gets the running file's text (references stay
// references) instead of REDACTED or expanded secrets (#13).
func TestParseUpdateRoundTrip(t *testing.T) {
	t.Parallel()
	live := liveConfig(t)
	out, err := live.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	c, file, err := parseUpdate("live.yaml", out, live, env(liveEnv))
	if err != nil {
		t.Fatalf("got %v, want the GET output to apply\n%s", err, out)
	}
	if c.AdminToken != live.AdminToken || c.Auth.Keys[0].Secret != live.Auth.Keys[0].Secret || c.Auth.Keys[1].Secret != live.Auth.Keys[1].Secret {
		t.Errorf("secrets changed")
	}
	for k, v := range live.Templates["web"].Env {
		if got := c.Templates["web"].Env[k]; got != v {
			t.Errorf("env %s: got %q, want %q", k, got, v)
		}
	}
	again, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, out) {
		t.Errorf("round trip changed the config:\n%s\nthen:\n%s", out, again)
	}
	// Each REDACTED comes back as the running file wrote it (#24, 2).
	for _, want := range []string{`admin_token: ${ADMIN}`, `"${K2_SECRET}"`, `DATABASE_URL: ${DB}`, `NODE_ENV: development`, ` $${NOT_A_VAR} `} {
		if !bytes.Contains(file, []byte(want)) {
			t.Errorf("file does not keep %s:\n%s", want, file)
		}
	}
	for _, bad := range []string{Redacted, liveEnv["ADMIN"], liveEnv["DB"]} {
		if bytes.Contains(file, []byte(bad)) {
			t.Errorf("file contains %q:\n%s", bad, file)
		}
	}
}

// TestParseUpdateMarkers: how REDACTED is matched to running values.
func TestParseUpdateMarkers(t *testing.T) {
	t.Parallel()
	head := "domain: preview.localhost\nadmin_token: REDACTED\n"
	tpl := "templates:\n  web:\n    image: nginx\n"
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *Config)
		err   string // "LINE:COL: message" part
	}{
		{"keys by kid, not by place", head + "auth:\n  keys:\n    - {kid: k2, alg: HS256, secret: REDACTED}\n" + tpl,
			func(t *testing.T, c *Config) {
				if got := string(c.Auth.Keys[0].Secret); got != liveEnv["K2_SECRET"] {
					t.Errorf("got k2's secret %q, want %q", got, liveEnv["K2_SECRET"])
				}
			}, ""},
		{"quoted markers", "domain: preview.localhost\nadmin_token: 'REDACTED'\nauth:\n  keys: [{kid: k1, alg: HS256, secret: \"REDACTED\"}]\n" + tpl + "    env: {DATABASE_URL: \"REDACTED\"}\n",
			func(t *testing.T, c *Config) {
				if c.Templates["web"].Env["DATABASE_URL"] != liveEnv["DB"] || string(c.AdminToken) != liveEnv["ADMIN"] {
					t.Errorf("got %q %q, want the running values", c.Templates["web"].Env["DATABASE_URL"], c.AdminToken)
				}
			}, ""},
		{"changed values apply", "domain: preview.localhost\nadmin_token: ${NEW_SECRET}\nauth:\n  keys: [{kid: k1, alg: HS256, secret: REDACTED}]\n" + tpl + "    env: {NODE_ENV: production, DATABASE_URL: REDACTED}\n",
			func(t *testing.T, c *Config) {
				if string(c.AdminToken) != liveEnv["NEW_SECRET"] || c.Templates["web"].Env["NODE_ENV"] != "production" {
					t.Errorf("got %q %q, want the new values", c.AdminToken, c.Templates["web"].Env["NODE_ENV"])
				}
			}, ""},
		{"unknown kid", head + "auth:\n  keys:\n    - {kid: k9, alg: HS256, secret: REDACTED}\n" + tpl, nil,
			"5:37: auth.keys[kid=k9].secret: REDACTED keeps the running value, but the running config has none here"},
		{"new env var", head + "auth:\n  keys: [{kid: k1, alg: HS256, secret: REDACTED}]\n" + tpl + "    env:\n      NEW: REDACTED\n", nil,
			"9:12: templates.web.env.NEW: REDACTED keeps the running value"},
		{"env of another template", head + "auth:\n  keys: [{kid: k1, alg: HS256, secret: REDACTED}]\ntemplates:\n  api:\n    image: x\n    env: {DATABASE_URL: REDACTED}\n", nil,
			"8:25: templates.api.env.DATABASE_URL: REDACTED keeps"},
		{"anchor standing for two values", head + "auth:\n  keys: [{kid: k1, alg: HS256, secret: REDACTED}]\n" + tpl + "    env: {DATABASE_URL: &r REDACTED, NODE_ENV: *r}\n", nil,
			"8:25: this REDACTED (an anchor used in several places) stands for different running values"},
		{"tagged and anchored markers", head + "auth:\n  keys: [{kid: k1, alg: HS256, secret: !!str REDACTED}]\n" + tpl + "    env: {DATABASE_URL: &r  REDACTED}\n",
			func(t *testing.T, c *Config) {
				if string(c.Auth.Keys[0].Secret) != "0123456789abcdef0123456789abcdef" || c.Templates["web"].Env["DATABASE_URL"] != liveEnv["DB"] {
					t.Errorf("got %q %q, want the running values", c.Auth.Keys[0].Secret, c.Templates["web"].Env["DATABASE_URL"])
				}
			}, ""},
		{"escaped marker", head + "auth:\n  keys: [{kid: k1, alg: HS256, secret: \"RE\\x44ACTED\"}]\n" + tpl, nil,
			"write REDACTED plainly"},
	}
	live := liveConfig(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, file, err := parseUpdate("put.yaml", []byte(tt.yaml), live, env(liveEnv))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), "put.yaml:") || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want put.yaml:%s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if bytes.Contains(file, []byte(Redacted)) {
				t.Errorf("file keeps REDACTED:\n%s", file)
			}
			tt.check(t, c)
		})
	}
	if _, _, err := parseUpdate("put.yaml", []byte(head+"auth: {jwks_url: \"https://a.example/j\"}\n"+tpl), nil, env(nil)); err == nil || !strings.Contains(err.Error(), "put.yaml:2:14: admin_token: REDACTED keeps") {
		t.Errorf("no running config: got %v, want an error at 2:14", err)
	}
}

// An alias cannot carry a running secret into an error message: the
// admin API shows those to whoever sent the text (found by a review: the
// key's secret came back in "invalid log level").
func TestParseUpdateErrorsHideSecrets(t *testing.T) {
	t.Parallel()
	live := liveConfig(t)
	for _, tt := range []struct{ name, yaml string }{
		{"key secret as the log level", "domain: preview.localhost\nadmin_token: REDACTED\nauth:\n  keys: [{kid: k1, alg: HS256, secret: &s REDACTED}]\nlog: {level: *s}\ntemplates:\n  web: {image: nginx}\n"},
		{"admin token from the environment", "domain: preview.localhost\nadmin_token: &s REDACTED\nauth:\n  keys: [{kid: k1, alg: HS256, secret: REDACTED}]\nlog: {level: *s}\ntemplates:\n  web: {image: nginx}\n"},
		{"env value", "domain: preview.localhost\nadmin_token: REDACTED\nauth:\n  keys: [{kid: k1, alg: HS256, secret: REDACTED}]\ntemplates:\n  web: {image: nginx, env: {DATABASE_URL: &s REDACTED}}\nlog: {level: *s}\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseUpdate("put.yaml", []byte(tt.yaml), live, env(liveEnv))
			if err == nil {
				t.Fatal("got no error, want an invalid log level")
			}
			for _, secret := range []string{"0123456789abcdef0123456789abcdef", liveEnv["ADMIN"], liveEnv["DB"], "${ADMIN}", "${DB}"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a running secret %q:\n%v", secret, err)
				}
			}
			if !strings.Contains(err.Error(), Redacted) {
				t.Errorf("got %v, want the value shown as %s", err, Redacted)
			}
		})
	}
}

func TestYAMLQuote(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", `a "b" \c`, "line\nbreak\ttab\rcr", "${X} $${Y}", "é ✓ 😀", "\x00\x1b\u00a0\u2028\ufeff", "\a\b\f\v\x7f", "\U0001F600\U000E0001"} {
		var got string
		c, err := parse("q.yaml", []byte("domain: a.localhost\nauth: {jwks_url: \"https://a.example/j\"}\ntemplates: {web: {image: x, env: {V: "+yamlQuote(s)+"}}}\n"), env(map[string]string{"X": "x"}))
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		got = c.raw[envKey("templates.web.env", "V")]
		if got != s || strings.Contains(yamlQuote(s), "\n") {
			t.Errorf("got %q from %s, want %q on one line", got, yamlQuote(s), s)
		}
	}
}

// The development default, with the key and admin token serve sets in
// code: its REDACTED copy (what the admin page shows) validates, and
// REDACTED stands for the running values.
func TestKeepCodeSecrets(t *testing.T) {
	c := Default()
	c.AdminToken = "dev-admin-token-0123456789abcdef"
	c.Auth.Keys = []Key{{KID: "dev-1", Alg: "HS256", Secret: "0123456789abcdef0123456789abcdef"}}
	shown, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ParseUpdate("config", shown, c); err == nil {
		t.Fatal("validated without KeepCodeSecrets: this test no longer shows why it exists")
	}
	c.KeepCodeSecrets()
	n, _, err := ParseUpdate("config", shown, c)
	if err != nil {
		t.Fatalf("the admin page copy of the development default does not validate: %v", err)
	}
	if n.AdminToken != c.AdminToken || n.Auth.Keys[0].Secret != c.Auth.Keys[0].Secret {
		t.Errorf("REDACTED did not stand for the running values")
	}
}

// TestParseUpdateKeepsTheFileAsWritten: the bytes ParseUpdate returns for
// the file are the text sent, comments, order and layout included, with
// only each REDACTED replaced (#24: the config API edits a file as a
// person would).
func TestParseUpdateKeepsTheFileAsWritten(t *testing.T) {
	t.Parallel()
	live, err := parse("live.yaml", []byte("domain: preview.localhost\nadmin_token: ${ADMIN}\nauth:\n  keys: [{kid: k1, alg: HS256, secret: \"0123456789abcdef0123456789abcdef\"}]\ntemplates:\n  web: {image: nginx}\n"), env(map[string]string{"ADMIN": "0123456789abcdef0123"}))
	if err != nil {
		t.Fatal(err)
	}
	put := "# the gateway\ndomain: preview.localhost   # public\n\nadmin_token: REDACTED\nauth:\n  # rotate yearly\n  keys: [{kid: k1, alg: HS256, secret: 'REDACTED'}]\ntemplates:\n  web: {image: nginx}  # the app\n"
	_, file, err := parseUpdate("put.yaml", []byte(put), live, env(map[string]string{"ADMIN": "0123456789abcdef0123"}))
	if err != nil {
		t.Fatal(err)
	}
	// Each REDACTED as the running file wrote it (#24, 2).
	want := strings.Replace(strings.Replace(put, "REDACTED", `${ADMIN}`, 1), "'REDACTED'", `"0123456789abcdef0123456789abcdef"`, 1)
	if string(file) != want {
		t.Errorf("got\n%s\nwant\n%s", file, want)
	}
}

// TestRedactedSourceRoundTrip: GET /admin/config shows the file as
// written, comments and layout kept, hidden values REDACTED in their own
// quoting; sent back unchanged it gives the file back byte for byte, and
// an edited line is the only line that changes (#24, 2: a round trip
// turned a commented 54-line file into a 139-line dump).
func TestRedactedSourceRoundTrip(t *testing.T) {
	t.Parallel()
	src := "# the preview gateway\n" + strings.Replace(liveSrc, "    image: nginx\n", "    image: nginx   # pinned below\n    # memory: 2GiB\n", 1)
	live, err := parse("live.yaml", []byte(src), env(liveEnv))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := live.RedactedSource()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# the preview gateway\n", "image: nginx   # pinned below\n", "    # memory: 2GiB\n",
		"admin_token: REDACTED\n", `secret: "REDACTED"}`, "DATABASE_URL: REDACTED\n", `EMPTY: ""`} {
		if !strings.Contains(string(shown), want) {
			t.Errorf("GET shows no %q:\n%s", want, shown)
		}
	}
	for _, bad := range []string{liveEnv["ADMIN"], "${ADMIN}", "0123456789abcdef0123456789abcdef", "development"} {
		if strings.Contains(string(shown), bad) {
			t.Errorf("GET shows %q:\n%s", bad, shown)
		}
	}
	_, file, err := parseUpdate("live.yaml", shown, live, env(liveEnv))
	if err != nil {
		t.Fatal(err)
	}
	if string(file) != src {
		t.Errorf("round trip: got file\n%s\nwant it unchanged:\n%s", file, src)
	}
	edited := strings.Replace(string(shown), "image: nginx ", "image: nginx:2", 1)
	_, file, err = parseUpdate("live.yaml", []byte(edited), live, env(liveEnv))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(src, "image: nginx ", "image: nginx:2", 1); string(file) != want {
		t.Errorf("edit: got file\n%s\nwant only the edited line changed:\n%s", file, want)
	}
}

// TestParseUpdateQuotesWhereTheFileTextWouldNotRead: a REDACTED moved to
// where the running file's text reads differently (plain ${X} into a flow
// mapping) is restored quoted, still standing for the running value.
func TestParseUpdateQuotesWhereTheFileTextWouldNotRead(t *testing.T) {
	t.Parallel()
	e := env(map[string]string{"ADMIN": "0123456789abcdef0123"})
	live, err := parse("live.yaml", []byte("domain: preview.localhost\nadmin_token: ${ADMIN}\nauth:\n  keys: [{kid: k1, alg: HS256, secret: \"0123456789abcdef0123456789abcdef\"}]\ntemplates:\n  web: {image: nginx}\n"), e)
	if err != nil {
		t.Fatal(err)
	}
	put := "{domain: preview.localhost, admin_token: REDACTED, auth: {keys: [{kid: k1, alg: HS256, secret: REDACTED}]}, templates: {web: {image: nginx}}}\n"
	c, file, err := parseUpdate("put.yaml", []byte(put), live, e)
	if err != nil {
		t.Fatalf("%v\n%s", err, file)
	}
	if string(c.AdminToken) != "0123456789abcdef0123" || !strings.Contains(string(file), `admin_token: "${ADMIN}"`) {
		t.Errorf("got admin token %d bytes, file\n%s\nwant the running value, quoted", len(c.AdminToken), file)
	}
}

// TestParseUpdateWritesABodyAsSent: a PUT body that is not an edit of the
// file (the effective config a script dumped, no comments) is the new
// file as sent, each REDACTED restored as the running file wrote it; no
// line of the old file is merged back in.
func TestParseUpdateWritesABodyAsSent(t *testing.T) {
	t.Parallel()
	live, err := parse("live.yaml", []byte("# the preview gateway\n"+liveSrc), env(liveEnv))
	if err != nil {
		t.Fatal(err)
	}
	dump, err := live.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(dump), "image: nginx\n", "image: nginx:2\n", 1)
	c, file, err := parseUpdate("live.yaml", []byte(body), live, env(liveEnv))
	if err != nil {
		t.Fatal(err)
	}
	if c.Templates["web"].Image != "nginx:2" || string(c.AdminToken) != liveEnv["ADMIN"] {
		t.Errorf("got image %q, admin token %d bytes; want nginx:2 and the running token", c.Templates["web"].Image, len(c.AdminToken))
	}
	want := strings.Replace(body, "admin_token: REDACTED", "admin_token: ${ADMIN}", 1)
	if f := string(file); strings.Contains(f, "# the preview gateway") || strings.Contains(f, Redacted) || !strings.HasPrefix(f, want[:strings.Index(want, "auth:")]) {
		t.Errorf("got file\n%s\nwant the body as sent, REDACTED restored", f)
	}
}

// TestParseUpdateAliasDoesNotShowSecrets: a REDACTED may stand for the
// running value only where values are hidden. An alias of it read where
// values show (a template's image, a map key such as a template or env
// name) would put the running secret into the config that
// GET /admin/config then shows to whoever sent the PUT, which the error
// messages are scrubbed to prevent (TestParseUpdateErrorsHideSecrets).
// The first two were accepted before; the map keys were refused already.
func TestParseUpdateAliasDoesNotShowSecrets(t *testing.T) {
	t.Parallel()
	live := liveConfig(t)
	head := "domain: preview.localhost\nadmin_token: REDACTED\n"
	for _, tt := range []struct{ name, yaml string }{
		{"key secret as an image", head + "auth:\n  keys: [{kid: k1, alg: HS256, secret: &s REDACTED}]\ntemplates:\n  web: {image: *s}\n"},
		{"secret from the environment as an issuer", "domain: preview.localhost\nadmin_token: REDACTED\nauth:\n  keys: [{kid: k2, alg: HS256, secret: &s REDACTED}]\n  issuers: [*s]\ntemplates:\n  web: {image: nginx}\n"},
		{"env value as a template name", head + "auth:\n  keys: [{kid: k1, alg: HS256, secret: REDACTED}]\ntemplates:\n  web: {image: nginx, env: {DATABASE_URL: &s REDACTED}}\n  *s : {image: nginx}\n"},
		{"admin token as an env name", "domain: preview.localhost\nadmin_token: &s REDACTED\nauth:\n  keys: [{kid: k1, alg: HS256, secret: REDACTED}]\ntemplates:\n  web: {image: nginx, env: {*s : x}}\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := parseUpdate("put.yaml", []byte(tt.yaml), live, env(liveEnv))
			if err == nil {
				shown, _ := c.Redacted()
				for _, secret := range []string{"0123456789abcdef0123456789abcdef", liveEnv["K2_SECRET"], liveEnv["ADMIN"], liveEnv["DB"]} {
					if bytes.Contains(shown, []byte(secret)) {
						t.Fatalf("accepted, and GET /admin/config would show the running secret %q:\n%s", secret, shown)
					}
				}
				t.Fatal("accepted, want a refusal of the alias")
			}
			for _, secret := range []string{"0123456789abcdef0123456789abcdef", liveEnv["K2_SECRET"], liveEnv["ADMIN"], liveEnv["DB"]} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the refusal shows the running secret %q: %v", secret, err)
				}
			}
		})
	}
}

// TestRedactedSourceFallbackRoundTrip: where the file cannot be shown as
// written (a secret in a block scalar), GET /admin/config shows the
// effective config; sent back, it changes no setting, and the file
// written (that config, as sent) reads back as it.
func TestRedactedSourceFallbackRoundTrip(t *testing.T) {
	t.Parallel()
	src := strings.Replace(liveSrc, "admin_token: ${ADMIN}\n", "admin_token: |-\n  block-admin-token-0123456789\n", 1)
	live, err := parse("live.yaml", []byte(src), env(liveEnv))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := live.RedactedSource()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(shown), "block-admin-token") || !strings.Contains(string(shown), "admin_token: REDACTED\n") {
		t.Fatalf("GET shows\n%s\nwant the effective config, admin_token REDACTED", shown)
	}
	c, file, err := parseUpdate("live.yaml", shown, live, env(liveEnv))
	if err != nil {
		t.Fatal(err)
	}
	if diff := Changed(live, c); len(diff) > 0 {
		t.Errorf("PUT of GET's output changed %v", diff)
	}
	back, err := parse("live.yaml", file, env(liveEnv))
	if err != nil {
		t.Fatalf("the file written does not parse: %v\n%s", err, file)
	}
	if diff := Changed(c, back); len(diff) > 0 || string(back.AdminToken) != "block-admin-token-0123456789" {
		t.Errorf("the file written reads differently at %v (admin token %d bytes):\n%s", diff, len(back.AdminToken), file)
	}
}
