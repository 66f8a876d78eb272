package cli

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
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
	names := sandboxesNames()
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
	if n := len(dockertest.Containers(t, dockertest.Client(t), runtime.LabelSandbox+"="+id)); n != 0 {
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

// TestSandboxesJSONErrorsOfTheCLI: with --json, every sandboxes
// subcommand that fails before or without an answer of the API (no
// gateway listening, no token, a bad flag or argument) prints one JSON
// error object in the API's shape on stdout, {"error", "code"}, the
// message on stderr, and exits as without --json (the CLI walk: stdout
// was empty, a script had nothing to parse). The subcommands are taken
// from the dispatch, so one added later is covered too.
func TestSandboxesJSONErrorsOfTheCLI(t *testing.T) {
	t.Setenv(adminEnv, "")
	t.Setenv(configEnv, "")
	t.Setenv(tokenEnv, "")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String() // nothing listens there once closed
	l.Close()

	type tc struct {
		args     []string
		exit     int
		wantCode string
		wantErr  string // in stderr
	}
	var cases []tc
	names := sandboxesNames()
	for _, name := range names {
		cmd := strings.Fields(name)
		args := append([]string{}, cmd...)
		switch name {
		case "ls":
		case "set":
			args = append(args, "abc", "--public", "true")
		case "link rm":
			args = append(args, "abc", "l1")
		default:
			args = append(args, "abc")
		}
		tok := []string{"--token", "some-token-0123456789"}
		with := func(more ...string) []string { return append(slices.Clone(args), more...) }
		cases = append(cases,
			tc{with(append(tok, "--admin", closed)...), 1, "unreachable", "no gateway answers at http://" + closed},
			tc{with("--admin", closed), 1, "no_token", "no API token"},
			tc{with(append(tok, "--admin", "not a url")...), 1, "usage", "--admin"},
			// The flag package stops at the first bad flag: --json
			// after it is still seen.
			tc{with(append(tok, "--bogus", "--admin", closed)...), 2, "usage", "flag provided but not defined: -bogus"},
			tc{append(append(slices.Clone(cmd), "a", "b", "c"), append(tok, "--admin", closed)...), 2, "usage", "usage: previewgate sandboxes " + name},
		)
		if name != "ls" {
			bad := append(slices.Clone(cmd), "Bad_Id")
			if name == "link rm" {
				bad = append(bad, "l1")
			}
			cases = append(cases, tc{append(bad, append(tok, "--admin", closed)...), 1, "bad_sandbox_id", "malformed sandbox id"})
		}
	}
	cases = append(cases,
		tc{[]string{"logs", "abc", "-f", "--token", "t", "--admin", closed}, 1, "unreachable", "no gateway answers"},
		tc{[]string{"logs", "abc", "--tail", "x", "--token", "t"}, 2, "usage", "invalid value"},
		tc{[]string{"set", "abc", "--public", "maybe", "--token", "t", "--admin", closed}, 1, "usage", "--public"},
		tc{[]string{"set", "abc", "--token", "t", "--admin", closed}, 1, "usage", "nothing to set"},
		tc{[]string{"frobnicate"}, 2, "usage", `unknown command "sandboxes frobnicate`},
	)
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errs := cli(append([]string{"sandboxes"}, append(c.args, "--json")...)...)
			var e struct{ Error, Code string }
			if err := json.Unmarshal([]byte(out), &e); err != nil || e.Code != c.wantCode || e.Error == "" || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "}\n") {
				t.Errorf("stdout %q (%v), want one JSON error object with code %q, one line", out, err, c.wantCode)
			}
			if code != c.exit || !strings.Contains(errs, c.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, c.exit, c.wantErr)
			}
		})
	}
	// Without --json, stdout stays empty.
	if code, out, _ := cli("sandboxes", "ls", "--token", "t", "--admin", closed); code != 1 || out != "" {
		t.Errorf("ls without --json against nothing: exit %d, stdout %q; want 1 and nothing", code, out)
	}
}

// sandboxesNames lists the sandboxes subcommands as typed ("link ls"),
// from the command table, so that one added later is tested too.
func sandboxesNames() []string {
	var names []string
	var walk func(prefix string, cmds []*command)
	walk = func(prefix string, cmds []*command) {
		for _, c := range cmds {
			names = append(names, prefix+c.name)
			walk(prefix+c.name+" ", c.subs)
		}
	}
	walk("", find(commands(), "sandboxes").subs)
	return names
}
