package cli

import (
	"bytes"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/app"
)

// checkToken says whether the gateway's verifier built from a accepts tok
// for sandbox id.
func checkToken(t *testing.T, a config.Auth, tok, id string) error {
	t.Helper()
	v, err := auth.NewVerifier(a, false)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r := httptest.NewRequest("GET", "http://sandbox-"+id+".preview.localhost/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	_, err = v.Check(r, id)
	return err
}

// TestConfigFromEnvironment: with only $PREVIEWGATE_CONFIG set (as the
// image sets it), token mint signs with that file's key even in a
// directory that holds a development key, and says which file signed;
// serve reads the same file; --config "" still picks the development
// default (the CLI walk: token mint read no $PREVIEWGATE_CONFIG, signed
// with the development key, and the gateway answered 401).
func TestConfigFromEnvironment(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv(configEnv, "")
	dev, _, err := app.Load("") // the development key in ./previewgate-data
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "previewgate.yaml")
	os.WriteFile(file, []byte(`domain: preview.localhost
admin_token: ${PG_TEST_NEVER_SET_ADMIN}
auth:
  audience: previewgate
  issuers: [backend]
  keys: [{kid: fromfile, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  app: {image: app:1}
`), 0o600)
	cfg, _, err := config.LoadPartial(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(configEnv, file)

	code, out, errs := cli("token", "mint", "--sandbox", "abc")
	if code != 0 {
		t.Fatalf("token mint with $%s: exit %d %s", configEnv, code, errs)
	}
	tok := strings.TrimSpace(out)
	if err := checkToken(t, cfg.Auth, tok, "abc"); err != nil {
		t.Errorf("token mint with $%s: the file's verifier says %v, want the token valid", configEnv, err)
	}
	if err := checkToken(t, dev.Auth, tok, "abc"); err == nil {
		t.Errorf("token mint with $%s: signed with the development key, want the file's", configEnv)
	}
	if want := "signed with key fromfile of " + file + " ($" + configEnv + ")"; !strings.Contains(errs, want) {
		// Not all of stderr: its next line holds the token.
		t.Errorf("token mint stderr starts %q, want %q", strings.SplitN(errs, "\n", 2)[0], want)
	}

	// --config '' is no file: the development key, even with the variable set.
	code, out, errs = cli("token", "mint", "--sandbox", "abc", "--config", "")
	if code != 0 || checkToken(t, dev.Auth, strings.TrimSpace(out), "abc") != nil {
		t.Errorf("token mint --config '': exit %d %s, want a token of the development key", code, errs)
	}

	// serve finds the file the same way.
	var b bytes.Buffer
	if f, err := parseServeFlags(nil, io.Discard, &b); err != nil || f.ConfigPath != file {
		t.Errorf("serve with $%s: config %q (%v %s), want %q", configEnv, f.ConfigPath, err, b.String(), file)
	}
	if f, err := parseServeFlags([]string{"--config", ""}, io.Discard, &b); err != nil || f.ConfigPath != "" {
		t.Errorf("serve --config '': config %q (%v), want none (the development default)", f.ConfigPath, err)
	}
}

// TestConfigFromEnvironmentUnreadable: a file $PREVIEWGATE_CONFIG names
// that cannot be read fails serve, token mint and ca export with an error
// that says the variable named it, and how to do without it. serve used
// to start the development default whatever the variable said; since it
// reads the variable, a shell or image that sets it (to a file not there)
// made `serve` fail on a file the command line never named.
func TestConfigFromEnvironmentUnreadable(t *testing.T) {
	t.Chdir(t.TempDir())
	missing := filepath.Join(t.TempDir(), "absent.yaml")
	t.Setenv(configEnv, missing)
	for _, args := range [][]string{
		{"serve"},
		{"token", "mint", "--sandbox", "abc"},
		{"ca", "export"},
	} {
		code, _, errs := cli(args...)
		if code == 0 || !strings.Contains(errs, "$"+configEnv+" names "+missing) || !strings.Contains(errs, "--config ''") {
			t.Errorf("%s with $%s naming a missing file: exit %d, stderr %q; want a failure naming $%s and --config ''",
				strings.Join(args, " "), configEnv, code, errs, configEnv)
		}
	}
	// An explicit --config is the user's own word: no hint about the variable.
	if code, _, errs := cli("serve", "--config", missing); code == 0 || strings.Contains(errs, configEnv) {
		t.Errorf("serve --config MISSING: exit %d, stderr %q; want a failure that does not mention $%s", code, errs, configEnv)
	}
}

// TestConfigValidateFindsItsFile: config validate checks its FILE
// argument, else --config, else $PREVIEWGATE_CONFIG, as every other
// command finds the file; no file is a usage error (exit 2), and FILE
// beside a different --config too. It required FILE whatever
// $PREVIEWGATE_CONFIG said.
func TestConfigValidateFindsItsFile(t *testing.T) {
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
	badErr := bad + ":5:"
	for _, tc := range []struct {
		name string
		env  string
		args []string
		code int
		out  string // in stdout
		errs string // in stderr
	}{
		{"from the environment", good, nil, 0, good + ": ok", ""},
		{"from the environment, invalid", bad, nil, 1, "", badErr},
		{"--config", "", []string{"--config", bad}, 1, "", badErr},
		{"--config over the environment", good, []string{"--config", bad}, 1, "", badErr},
		{"FILE over the environment", bad, []string{good}, 0, good + ": ok", ""},
		{"FILE and the same --config", "", []string{"--config", good, good}, 0, good + ": ok", ""},
		{"FILE and another --config", "", []string{"--config", bad, good}, 2, "", "name different files"},
		{"none", "", nil, 2, "", "no file to check: give FILE, --config FILE or $" + configEnv},
		{"--config '' over the environment", good, []string{"--config", ""}, 2, "", "no file to check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(configEnv, tc.env)
			code, out, errs := cli(append([]string{"config", "validate"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.errs) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, %q in stdout, %q in stderr", code, out, errs, tc.code, tc.out, tc.errs)
			}
			if tc.code == 1 && !strings.HasPrefix(errs, badErr) {
				t.Errorf("stderr %q, want it to start FILE:LINE:COL: %q", errs, badErr)
			}
		})
	}
}
