package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// sandboxes show is GET /admin/sandboxes/{id} from a terminal: a table of
// one sandbox for people, the API's object (the one ls --json lists) with
// --json, the API's 404 for none. set on a stopped sandbox prints the
// API's note that the keep-up waits until it runs.
func TestSandboxesCLIShow(t *testing.T) {
	id, never := dockertest.UniqueID("clishow"), dockertest.UniqueID("clishow")
	_, adminAddr := startCLIGateway(t, id)
	flags := []string{"--admin", adminAddr, "--token", cliAPIToken}
	if code, _, errs := cli(append([]string{"sandboxes", "up", id, "--metadata", "user=u42"}, flags...)...); code != 0 {
		t.Fatalf("up: exit %d %s", code, errs)
	}
	code, out, errs := cli(append([]string{"sandboxes", "show", id}, flags...)...)
	for _, want := range []string{`(?m)^ID +` + regexp.QuoteMeta(id) + `$`, `(?m)^TEMPLATE +app$`, `(?m)^STATE +running$`,
		`(?m)^METADATA +user=u42$`, `(?m)^PUBLIC +template's$`, `(?m)^LIVE LINKS +0$`, `(?m)^IDLE STOP +stop in \d+m$`} {
		if code != 0 || !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("show: exit %d\n%s%s\nwant a line %s", code, out, errs, want)
		}
	}
	code, out, errs = cli(append([]string{"sandboxes", "show", id, "--json"}, flags...)...)
	var one map[string]any
	if err := json.Unmarshal([]byte(out), &one); code != 0 || err != nil {
		t.Fatalf("show --json: exit %d %q %s, want the API's object", code, out, errs)
	}
	listed := lsJSON(t, adminAddr)[id]
	for _, k := range []string{"id", "template", "state", "container", "started_at", "metadata"} {
		a, _ := json.Marshal(one[k])
		b, _ := json.Marshal(listed[k])
		if string(a) != string(b) {
			t.Errorf("show --json %s: %s, ls --json has %s", k, a, b)
		}
	}
	if code, _, errs := cli(append([]string{"sandboxes", "show", never}, flags...)...); code != 1 || !strings.Contains(errs, "not_found") {
		t.Errorf("show of no sandbox: exit %d %q, want 1 and not_found", code, errs)
	}

	if code, _, errs := cli(append([]string{"sandboxes", "stop", id}, flags...)...); code != 0 {
		t.Fatalf("stop: exit %d %s", code, errs)
	}
	code, out, errs = cli(append([]string{"sandboxes", "set", id, "--keep-up", "1h"}, flags...)...)
	if code != 0 || !strings.Contains(out, "kept up until") || !strings.Contains(errs, "note: sandbox "+id+" is exited") {
		t.Errorf("set --keep-up on a stopped sandbox: exit %d %q %q, want it set and the note that it waits", code, out, errs)
	}
}
