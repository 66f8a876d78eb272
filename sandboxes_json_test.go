package main

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// TestSandboxesJSONErrors: with --json, every sandboxes subcommand that
// the API answers with an error prints the API's JSON error object on
// stdout as sent, its message on stderr, and exits 1 (the CLI walk:
// stdout was empty, a script had nothing to parse). The subcommands are
// taken from the dispatch, so one added later is covered too.
func TestSandboxesJSONErrors(t *testing.T) {
	id := dockertest.UniqueID("clijson")
	_, adminAddr := startCLIGateway(t, id)
	t.Setenv(adminEnv, "")
	t.Setenv(configEnv, "")
	t.Setenv(tokenEnv, "")

	type tc struct {
		args     []string
		token    string
		wantCode string // the API's "code"
		wantErr  string // in stderr
	}
	var cases []tc
	names := append(slices.Sorted(maps.Keys(sandboxesCmds)), "link", "link ls", "link rm")
	for _, name := range names {
		args := strings.Fields(name)
		switch name {
		case "ls":
		case "set":
			args = append(args, id, "--public", "true") // it refuses to send nothing
		case "link rm":
			args = append(args, id, "l1")
		default:
			args = append(args, id)
		}
		// A wrong token: every call's answer is the API's 401.
		cases = append(cases, tc{args, "wrong-token-0123456789", "unauthorized", "check --token"})
	}
	cases = append(cases,
		tc{[]string{"logs", "-f", id}, "wrong-token-0123456789", "unauthorized", "check --token"},
		tc{[]string{"logs", id}, cliAPIToken, "not_found", "no such sandbox (not_found)"},
		tc{[]string{"up", id, "--template", "nope"}, cliAPIToken, "unknown_template", `unknown template "nope"`},
	)
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append([]string{"sandboxes"}, c.args...)
			code, out, errs := cli(append(args, "--json", "--admin", adminAddr, "--token", c.token)...)
			var e struct{ Error, Code string }
			if err := json.Unmarshal([]byte(out), &e); err != nil || e.Code != c.wantCode || e.Error == "" || !strings.HasSuffix(out, "}\n") {
				t.Errorf("stdout %q (%v), want the API's JSON error object with code %q, one line", out, err, c.wantCode)
			}
			if code != 1 || !strings.Contains(errs, c.wantErr) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, errs, c.wantErr)
			}
		})
	}
	if n := len(dockertest.Containers(t, dockertest.Client(t), sandboxmgr.LabelSandbox+"="+id)); n != 0 {
		t.Errorf("refused calls made %d containers", n)
	}
}

// TestSandboxesJSONErrorNotJSON: an error answer that is not JSON (a
// proxy's page in front of the admin listener) still prints a JSON error
// object on stdout with --json.
func TestSandboxesJSONErrorNotJSON(t *testing.T) {
	t.Setenv(adminEnv, "")
	t.Setenv(configEnv, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<h1>502 Bad Gateway</h1>")
	}))
	defer srv.Close()
	code, out, errs := cli("sandboxes", "ls", "--json", "--admin", srv.URL, "--token", cliAPIToken)
	var e struct{ Error string }
	if err := json.Unmarshal([]byte(out), &e); err != nil || !strings.Contains(e.Error, "502 Bad Gateway") || code != 1 || !strings.Contains(errs, "502 Bad Gateway") {
		t.Errorf("exit %d, stdout %q (%v), stderr %q; want 1, a JSON error object naming the status, and the message", code, out, err, errs)
	}
}
