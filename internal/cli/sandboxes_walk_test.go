package cli

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The CLI does what the API does for a backend (#23, the platform walk):
// `sandboxes up --env` sets a name the template's allow_env lists on the
// sandbox it creates, and a name it does not list is the API's 400; up
// on a sandbox that exists says that its flags were not applied; set
// takes keep_up_until as --keep-up-until; ls says why a start failed.
func TestSandboxesCLIUpEnvAndSet(t *testing.T) {
	id, refused, crashed := dockertest.UniqueID("clienv"), dockertest.UniqueID("clienv"), dockertest.UniqueID("clienv")
	_, adminAddr := startCLIGateway(t, id, refused, crashed)
	flags := []string{"--admin", adminAddr, "--token", cliAPIToken}
	if code, _, errs := cli(append([]string{"sandboxes", "up", id, "--env", "GREETING=hi", "--metadata", "user=u42"}, flags...)...); code != 0 {
		t.Fatalf("up --env GREETING=hi: exit %d %s", code, errs)
	}
	dc := dockertest.Client(t)
	c := dockertest.OnlyContainer(t, dc, runtime.LabelSandbox+"="+id)
	ins, err := dc.ContainerInspect(context.Background(), c.ID)
	if err != nil || !slices.Contains(ins.Config.Env, "GREETING=hi") || ins.Config.Labels[runtime.LabelMetaPrefix+"user"] != "u42" {
		t.Errorf("container env %v, labels %v (%v): want GREETING=hi and metadata user=u42", ins.Config.Env, ins.Config.Labels, err)
	}
	// A second up finds it: told that its flags did not apply.
	code, _, errs := cli(append([]string{"sandboxes", "up", id, "--metadata", "user=other"}, flags...)...)
	if code != 0 || !strings.Contains(errs, "already existed") {
		t.Errorf("up --metadata on an existing sandbox: exit %d %q, want 0 and a note that it keeps its own", code, errs)
	}
	// set --keep-up-until: PATCH's keep_up_until, and none ends it.
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	code, out, errs := cli(append([]string{"sandboxes", "set", id, "--keep-up-until", until.Format(time.RFC3339)}, flags...)...)
	if code != 0 || !strings.Contains(out, "kept up until "+until.Local().Format(time.RFC3339)) {
		t.Errorf("set --keep-up-until: exit %d %q %s, want it kept up until %s", code, out, errs, until)
	}
	if code, out, errs := cli(append([]string{"sandboxes", "set", id, "--keep-up-until", "none"}, flags...)...); code != 0 || strings.Contains(out, "kept up") {
		t.Errorf("set --keep-up-until none: exit %d %q %s, want the keep-up ended", code, out, errs)
	}
	// ls says why a sandbox that is not running failed its last start.
	if code, _, errs := cli(append([]string{"sandboxes", "up", crashed, "--env", "CRASH=boom"}, flags...)...); code != 1 || !strings.Contains(errs, "sandbox_exited") {
		t.Errorf("up of an app that exits: exit %d %q, want 1 and sandbox_exited", code, errs)
	}
	code, out, errs = cli(append([]string{"sandboxes", "ls"}, flags...)...)
	// exited or crash_loop: whether the app's exit is seen by the readiness
	// wait or by a second start depends on how fast the engine is.
	if row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(crashed) + ` +app +exited \((exited|crash_loop), code 1\) `); code != 0 || !row.MatchString(out) {
		t.Errorf("ls: exit %d\n%s%s\nwant %s exited (exited or crash_loop, code 1)", code, out, errs, crashed)
	}
	code, _, errs = cli(append([]string{"sandboxes", "up", refused, "--env", "NOPE=1"}, flags...)...)
	if code != 1 || !strings.Contains(errs, "env_not_allowed") {
		t.Errorf("up --env NOPE=1: exit %d %q, want 1 and env_not_allowed", code, errs)
	}
	if n := len(dockertest.Containers(t, dc, runtime.LabelSandbox+"="+refused)); n != 0 {
		t.Errorf("a refused up made %d containers", n)
	}
}

// token mint refuses what it cannot do rather than print something else:
// --url for "*" printed the bare token where a script reads a URL, and
// --ttl 0 signed the default 15 minutes.
func TestTokenMintRefusesWhatItCannotDo(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "previewgate.yaml")
	if code, _, errs := cli("config", "init", cfgFile); code != 0 {
		t.Fatalf("config init: exit %d %s", code, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sandbox", "*", "--url"}, "--url needs one sandbox id"},
		{[]string{"--sandbox", "abc", "--ttl", "0s"}, "--ttl must be a positive duration"},
	} {
		code, out, errs := cli(append([]string{"token", "mint", "--config", cfgFile}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, tc.want) {
			// Never the token itself in the log: how much was printed.
			t.Errorf("token mint %v: exit %d, %d bytes on stdout, stderr %q; want 2, nothing on stdout and %q", tc.args, code, len(out), errs, tc.want)
		}
	}
	if code, out, _ := cli("token", "mint", "--config", cfgFile, "--sandbox", "*"); code != 0 || strings.Count(out, ".") != 2 {
		t.Errorf("token mint --sandbox *: exit %d, %d bytes, want a token", code, len(out))
	}
}
