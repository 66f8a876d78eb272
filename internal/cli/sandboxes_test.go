package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/app"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

const (
	cliAdminToken = "cli-admin-token-0123456789abcdef"
	cliAPIToken   = "cli-api-token-sandboxes-0123456"
)

// startCLIGateway runs a gateway in the test process as serve builds it
// (runtime, certificates, listeners; no file watching) from a config on
// loopback with the admin token, an API token with the sandboxes scope
// and the template app (the testapp image), and stops it when t ends. It
// returns the config file and the admin listener's address.
func startCLIGateway(t *testing.T, ids ...string) (cfgFile, adminAddr string) {
	t.Helper()
	cfgFile, adminAddr, _ = startScopedCLIGateway(t, dockertest.ScopedLabels(), t.TempDir(), ids...)
	return cfgFile, adminAddr
}

// startScopedCLIGateway is startCLIGateway with the scope labels and the
// data dir given; stop ends the gateway before t does. A Docker engine is
// served by one gateway per scope, its records in its data dir: a second
// gateway of the scope is a restart, on the same data dir once the first
// stopped (started while the first serves, it would wait as a standby).
func startScopedCLIGateway(t *testing.T, scope map[string]string, dataDir string, ids ...string) (cfgFile, adminAddr string, stop func()) {
	t.Helper()
	dockertest.Client(t)
	image := dockertest.TestAppImage(t)
	network := dockertest.Network(t)
	removeSandboxesAtEnd(t, ids...)
	adminAddr = freePort(t)
	cfgFile = filepath.Join(t.TempDir(), "previewgate.yaml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
domain: preview.localhost
listen: {http: %q, admin: %q}
data_dir: %q
admin_token: %s
api_tokens: [{token: %s, scopes: [sandboxes]}]
docker: {network: %q}
auth:
  audience: previewgate
  issuers: [test]
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
default_template: app
templates:
  app: {image: %q, ready: {path: /, timeout: 20s}, allow_env: [GREETING, CRASH]}
`, freePort(t), adminAddr, dataDir, cliAdminToken, cliAPIToken, network, image)), 0o600)
	cfg, _, err := app.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Scoped to this test: the gateway adopts and reaps only its own.
	a, err := app.Start(ctx, cfg, scope, testkit.Logger(t))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			a.Stop()
		})
	}
	t.Cleanup(stop)
	return cfgFile, adminAddr, stop
}

// cli runs previewgate with args in the test process.
func cli(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// lsJSON is `sandboxes ls --json`, decoded.
func lsJSON(t *testing.T, adminAddr string) map[string]map[string]any {
	t.Helper()
	code, out, errs := cli("sandboxes", "ls", "--json", "--admin", adminAddr, "--token", cliAPIToken)
	if code != 0 {
		t.Fatalf("ls --json: exit %d %s", code, errs)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("ls --json: %v in %q, want the API's JSON list", err, out)
	}
	byID := map[string]map[string]any{}
	for _, s := range list {
		byID[s["id"].(string)] = s
	}
	return byID
}

// TestSandboxesCLI: `previewgate sandboxes` against a gateway running in
// the test process, with an API token of scope sandboxes (#23): up
// creates and waits, ls prints a table and the API's JSON, logs prints
// and follows the output, stop ends the follow, rm removes; the token
// comes from --token or $PREVIEWGATE_TOKEN, the address from --admin,
// $PREVIEWGATE_ADMIN_ADDR or --config's listen.admin; API errors are
// their message and exit 1.
func TestSandboxesCLI(t *testing.T) {
	id := dockertest.UniqueID("cli")
	cfgFile, adminAddr := startCLIGateway(t, id)
	t.Setenv(adminEnv, "")
	t.Setenv("PREVIEWGATE_CONFIG", "")
	t.Setenv(tokenEnv, "")

	// up: the address from --config's listen.admin, the host from its domain.
	code, out, errs := cli("sandboxes", "up", id, "--config", cfgFile, "--token", cliAPIToken, "--template", "app")
	if code != 0 {
		t.Fatalf("up: exit %d %s", code, errs)
	}
	if want := "sandbox " + id + " running (template app, took "; !strings.Contains(out, want) ||
		!strings.Contains(out, "sandbox-"+id+".preview.localhost\n") {
		t.Errorf("up: got %q, want %q and the sandbox host", out, want)
	}

	// ls: a table for people; the token and address from the environment.
	t.Setenv(tokenEnv, cliAPIToken)
	t.Setenv(adminEnv, adminAddr)
	code, out, errs = cli("sandboxes", "ls")
	if code != 0 {
		t.Fatalf("ls: exit %d %s", code, errs)
	}
	header := regexp.MustCompile(`(?m)^ID +TEMPLATE +STATE +STARTED +LAST ACTIVITY +CONTAINER +REQUESTS +IDLE STOP +METADATA$`)
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + ` +app +running +(\d+s ago|just now) +\S`)
	if !header.MatchString(out) || !row.MatchString(out) {
		t.Errorf("ls: got\n%s\nwant a header and a running row for %s", out, id)
	}
	t.Setenv(tokenEnv, "")
	t.Setenv(adminEnv, "")

	// ls --json: the API's list as is; the admin token works too.
	if s := lsJSON(t, adminAddr)[id]; s == nil || s["state"] != "running" || s["template"] != "app" || s["started_at"] == nil {
		t.Errorf("ls --json: got %v for %s, want it running from app", s, id)
	}
	if code, out, errs := cli("sandboxes", "ls", "--admin", "http://"+adminAddr+"/", "--token", cliAdminToken); code != 0 || !strings.Contains(out, id) {
		t.Errorf("ls with the admin token: exit %d %q %s", code, out, errs)
	}

	cliLinks(t, id, adminAddr)

	// logs: Docker copies the output asynchronously; poll for the line.
	testkit.WaitFor(t, "the listening line from sandboxes logs", func() bool {
		code, out, errs := cli("sandboxes", "logs", id, "--tail", "5", "--admin", adminAddr, "--token", cliAPIToken)
		if code != 0 {
			t.Fatalf("logs: exit %d %s", code, errs)
		}
		return strings.Contains(out, "testapp: listening on :3000\n")
	})
	code, out, _ = cli("sandboxes", "logs", id, "--json", "--admin", adminAddr, "--token", cliAPIToken)
	var logs struct {
		ID    string
		Lines []string
	}
	if err := json.Unmarshal([]byte(out), &logs); code != 0 || err != nil || logs.ID != id || len(logs.Lines) == 0 {
		t.Errorf("logs --json: exit %d %q, want the API's {id, lines}", code, out)
	}

	// logs -f prints the output and ends (exit 0) when stop stops the container.
	follow := &syncBuffer{}
	followErr := &syncBuffer{}
	followed := make(chan int, 1)
	go func() {
		followed <- run([]string{"sandboxes", "logs", "-f", id, "--tail", "5", "--admin", adminAddr, "--token", cliAPIToken}, follow, followErr)
	}()
	testkit.WaitFor(t, "logs -f to print the listening line", func() bool {
		return strings.Contains(follow.String(), "testapp: listening on :3000")
	})

	code, out, errs = cli("sandboxes", "stop", id, "--admin", adminAddr, "--token", cliAPIToken)
	if code != 0 || out != "sandbox "+id+" stopped\n" {
		t.Fatalf("stop: exit %d %q %s", code, out, errs)
	}
	select {
	case code := <-followed:
		if code != 0 || !strings.Contains(followErr.String(), "sandbox "+id+" stopped (now exited)") {
			t.Errorf("logs -f after stop: exit %d %q, want 0 and that the sandbox stopped (now exited)", code, followErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs -f did not end when the container stopped")
	}
	if s := lsJSON(t, adminAddr)[id]; s == nil || s["state"] == "running" {
		t.Errorf("after stop: got %v, want %s listed and not running", s, id)
	}

	// rm, then rm again: the API's 404 message, exit 1.
	if code, out, errs := cli("sandboxes", "rm", id, "--json", "--admin", adminAddr, "--token", cliAPIToken); code != 0 || !json.Valid([]byte(out)) || !strings.Contains(out, `"remove":true`) {
		t.Fatalf("rm --json: exit %d %q %s", code, out, errs)
	}
	if s, ok := lsJSON(t, adminAddr)[id]; ok {
		t.Errorf("after rm: %s still listed: %v", id, s)
	}
	if code, _, errs := cli("sandboxes", "rm", id, "--admin", adminAddr, "--token", cliAPIToken); code != 1 || !strings.Contains(errs, "no such sandbox (not_found)") {
		t.Errorf("rm of a removed sandbox: exit %d %q, want 1 and the API's message", code, errs)
	}
}

// TestSandboxesCLIErrors: a bad or missing token, an unknown template and
// a malformed id exit 1 with the API's (or the CLI's) message, and a
// gateway that is not there is named with how to point at another one.
func TestSandboxesCLIErrors(t *testing.T) {
	id := dockertest.UniqueID("clierr")
	cfgFile, adminAddr := startCLIGateway(t, id)
	t.Setenv(adminEnv, "")
	t.Setenv("PREVIEWGATE_CONFIG", "")
	t.Setenv(tokenEnv, "")
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"bad token", []string{"ls", "--admin", adminAddr, "--token", "wrong-token-0123456789"}, "scope, required (unauthorized); check --token or $" + tokenEnv},
		{"bad token from --config's address", []string{"stop", id, "--config", cfgFile, "--token", "wrong-token-0123456789"}, "sandboxes scope, required"},
		{"no token", []string{"ls", "--admin", adminAddr}, "no API token: pass --token or set $" + tokenEnv},
		{"unknown template", []string{"up", id, "--template", "nope", "--admin", adminAddr, "--token", cliAPIToken}, `unknown template "nope" (templates: `},
		{"no such sandbox", []string{"logs", id, "--admin", adminAddr, "--token", cliAPIToken}, "no such sandbox (not_found)"},
		{"no such sandbox, follow", []string{"logs", "-f", id, "--admin", adminAddr, "--token", cliAPIToken}, "no such sandbox (not_found)"},
		{"malformed id", []string{"stop", "Bad_Id", "--admin", adminAddr, "--token", cliAPIToken}, `malformed sandbox id "Bad_Id"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := cli(append([]string{"sandboxes"}, tc.args...)...)
			if code != 1 || !strings.Contains(errs, tc.want) || out != "" {
				t.Errorf("got exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, tc.want)
			}
			if strings.Contains(errs, "wrong-token") {
				t.Errorf("stderr %q repeats the token", errs)
			}
		})
	}
	if n := len(dockertest.Containers(t, dockertest.Client(t), runtime.LabelSandbox+"="+id)); n != 0 {
		t.Errorf("refused calls made %d containers", n)
	}
}

// TestSandboxesCLINoGateway: a refused connection says which address was
// tried and how to set another; the usage lists the subcommands.
func TestSandboxesCLINoGateway(t *testing.T) {
	t.Setenv(adminEnv, "")
	t.Setenv("PREVIEWGATE_CONFIG", "")
	dead := testkit.DeadAddr(t)
	code, _, errs := cli("sandboxes", "ls", "--admin", dead, "--token", cliAPIToken)
	if code != 1 || !strings.Contains(errs, "http://"+dead) || !strings.Contains(errs, "connection refused") || !strings.Contains(errs, "--admin URL, $"+adminEnv) {
		t.Errorf("dead address: exit %d %q, want 1 naming %s and how to set the address", code, errs, dead)
	}
	if code, out, _ := cli("sandboxes", "--help"); code != 0 || !strings.Contains(out, "sandboxes logs ID [-f]") || !strings.Contains(out, "sandboxes link rm ID LINKID") {
		t.Errorf("sandboxes --help: exit %d %q, want the subcommands, link's included", code, out)
	}
	if code, _, errs := cli("sandboxes", "link", "rm", "abc"); code != 2 || !strings.Contains(errs, "usage: previewgate sandboxes link rm ID LINKID") {
		t.Errorf("link rm without a link id: exit %d %q, want 2 and its usage", code, errs)
	}
	if code, _, errs := cli("sandboxes", "up"); code != 2 || !strings.Contains(errs, "usage: previewgate sandboxes up ID") {
		t.Errorf("up without an id: exit %d %q, want 2 and its usage", code, errs)
	}
	if code, out, _ := cli("--help"); code != 0 || !strings.Contains(out, "previewgate sandboxes ls|up|stop|rm|logs") {
		t.Errorf("--help: exit %d, want the sandboxes command in %q", code, out)
	}
}
