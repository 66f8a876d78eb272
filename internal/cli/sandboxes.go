package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/previewgate/previewgate/config"
)

// The sandboxes commands: the admin listener's /admin/sandboxes calls from
// a terminal, tables for people and the API's JSON for scripts (#23).

// tokenEnv holds the token of the sandboxes commands when --token is not given.
const tokenEnv = "PREVIEWGATE_TOKEN"

const sandboxesUsage = `usage:
  previewgate sandboxes ls [--metadata K=V]... [flags]
                                                 list sandboxes: id, template, state, started,
                                                 last activity, container, requests, when the
                                                 idle reaper stops it, metadata; --metadata
                                                 keeps those that carry every K=V given
  previewgate sandboxes up ID [--template NAME] [--metadata K=V]... [--env NAME=V]... [flags]
                                                 create or wake ID, wait until it is ready
                                                 (metadata labels a sandbox it creates, env
                                                 sets names in its template's allow_env)
  previewgate sandboxes show ID [flags]          one sandbox: what ls shows of it, why it
                                                 is up, its settings
  previewgate sandboxes stop ID [flags]          stop ID (the next request wakes it)
  previewgate sandboxes rm ID [flags]            remove ID's container
  previewgate sandboxes pause ID [flags]         pause ID, memory kept (Docker; Kubernetes
                                                 has no pause: use stop)
  previewgate sandboxes resume ID [flags]        unpause or start ID, wait until it is ready
  previewgate sandboxes requests ID [--n N] [flags]
                                                 ID's last requests through the replica
                                                 that answers, newest first
  previewgate sandboxes logs ID [-f] [--tail N] [flags]
                                                 print ID's last output; -f follows it until
                                                 the container stops or is removed, then
                                                 says which
  previewgate sandboxes set ID [--public true|false|default] [--keep-up 2h | --keep-up-until TIME] [flags]
                                                 per-sandbox settings, kept by the runtime
  previewgate sandboxes link ID [--ttl 10m] [--port N] [--path /x] [flags]
                                                 mint a share link (prints its URL)
  previewgate sandboxes link ls ID [flags]       list ID's share links (never their secrets)
  previewgate sandboxes link rm ID LINKID [flags]
                                                 revoke a share link on every replica

flags of every subcommand:
  --token TOKEN   an api_tokens entry with scope sandboxes, or the admin token
                  (default $` + tokenEnv + `)
  --admin URL     the gateway's admin listener, e.g. http://127.0.0.1:9090 (default:
                  listen.admin of an explicit --config; else $` + adminEnv + `;
                  else listen.admin of $PREVIEWGATE_CONFIG; else ` + config.DevListenAdmin + `)
  --config FILE   config file whose listen.admin (and domain, for up) to use
  --json          print the API's JSON as is, for scripts; any failure as one
                  JSON error object {"error", "code"}: the API's as sent, or the
                  CLI's own (code usage, bad_sandbox_id, no_token, config,
                  unreachable, timeout, bad_answer, follow_failed,
                  stream_broken); the message on stderr, the same exit status

"previewgate sandboxes SUBCOMMAND --help" shows a subcommand's flags.
`

// sandboxesCmds are the subcommands sandboxes knows.
var sandboxesCmds = map[string]func(*sandboxesCmd) error{
	"ls": sbxList, "up": sbxUp, "stop": sbxStop, "rm": sbxRemove, "logs": sbxLogs,
	"pause": sbxPause, "resume": sbxResume, "requests": sbxRequests,
}

// sandboxesMain runs "previewgate sandboxes ARGS"; ok is false when args
// name no subcommand (run then prints the group's usage).
func sandboxesMain(args []string, stdout, stderr io.Writer) (ok bool, err error) {
	if len(args) > 0 && args[0] == "link" {
		return true, sandboxesLink(args[1:], stdout, stderr) // sandboxes_links.go
	}
	if len(args) == 0 || sandboxesCmds[args[0]] == nil {
		if wantsJSON(args) && !(len(args) == 1 && isHelp(args[0])) {
			// run prints the group's usage on stderr and exits 2.
			msg := "sandboxes: no subcommand (ls, up, show, stop, rm, logs, ...)"
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				msg = fmt.Sprintf("sandboxes: unknown subcommand %q", args[0])
			}
			_, err := stdout.Write(jsonError(usageError(msg)))
			return false, err
		}
		return false, nil
	}
	c := &sandboxesCmd{name: args[0], stdout: stdout, stderr: stderr}
	return true, c.parse(args[1:]).run(sandboxesCmds[args[0]])
}

// run runs the subcommand f. With --json any failure also goes to
// stdout as one JSON error object (sandboxes_errors.go): the API's as it
// sent it, else the CLI's own in the same shape. A script reading stdout
// gets something to parse; the message is on stderr and the exit status
// as without --json.
func (c *sandboxesCmd) run(f func(*sandboxesCmd) error) error {
	err := f(c)
	if err == nil || !c.json || errors.Is(err, flag.ErrHelp) {
		return err
	}
	if _, werr := c.stdout.Write(jsonError(err)); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// sandboxesCmd is one sandboxes subcommand: its flags, then its client.
type sandboxesCmd struct {
	name           string
	stdout, stderr io.Writer
	fs             *flag.FlagSet
	args           []string // positional arguments

	token, admin, config string
	json                 bool
	template             string   // up
	tail                 int      // logs
	follow               bool     // logs
	metadata             metaFlag // ls (filters), up (labels)
	env                  metaFlag // up
	n                    int      // requests
	ext                  extFlags // link, set (sandboxes_links.go)

	parseErr error
	cfg      *config.Config // the config file read, if any (up prints its sandbox host)
	base     string         // the admin listener, http://host:port
	hc       *http.Client
}

var sandboxesSynopsis = map[string]string{
	"ls":       "sandboxes ls [flags]   (list sandboxes)",
	"up":       "sandboxes up ID [--template NAME] [flags]   (create or wake ID, wait until ready)",
	"stop":     "sandboxes stop ID [flags]   (stop ID; the next request wakes it)",
	"rm":       "sandboxes rm ID [flags]   (remove ID's container)",
	"logs":     "sandboxes logs ID [-f] [--tail N] [flags]   (print ID's output; -f follows it)",
	"pause":    "sandboxes pause ID [flags]   (pause ID, memory kept; Docker only)",
	"resume":   "sandboxes resume ID [flags]   (unpause or start ID, wait until ready)",
	"requests": "sandboxes requests ID [--n N] [flags]   (ID's last requests, newest first)",
}

// parse reads the subcommand's flags, before and after its positional
// arguments ("up ID --template app"); errors are kept for the subcommand.
func (c *sandboxesCmd) parse(args []string) *sandboxesCmd {
	fs := newFlagSet("sandboxes "+c.name, sandboxesSynopsis[c.name], args, c.stdout, c.stderr)
	fs.StringVar(&c.token, "token", "", "API token: an api_tokens entry with scope sandboxes, or the admin token (default $"+tokenEnv+")")
	fs.StringVar(&c.admin, "admin", "", "admin listener `URL` (default: listen.admin of an explicit --config; else $"+adminEnv+"; else listen.admin of $PREVIEWGATE_CONFIG; else "+config.DevListenAdmin+")")
	configFlag(fs, &c.config, "config `file` whose listen.admin (and domain, for up) to use", "see --admin")
	fs.BoolVar(&c.json, "json", false, "print the API's JSON as is; any failure as one JSON error object {\"error\", \"code\"}")
	switch c.name {
	case "up":
		fs.StringVar(&c.template, "template", "", "template to create the sandbox from (default: the config's default_template)")
		c.metadata = metaFlag{}
		fs.Var(c.metadata, "metadata", "`KEY=VALUE` metadata of a sandbox this creates (repeat for more)")
		c.env = metaFlag{}
		fs.Var(c.env, "env", "`NAME=VALUE` environment of a sandbox this creates; NAME must be in the template's allow_env (repeat for more)")
	case "ls":
		c.metadata = metaFlag{}
		fs.Var(c.metadata, "metadata", "list only sandboxes with metadata `KEY=VALUE` (repeat: all must match)")
	case "requests":
		fs.IntVar(&c.n, "n", 0, "how many of the last requests to print (default: all kept)")
	case "logs":
		fs.IntVar(&c.tail, "tail", 100, "how many of the last lines to print (at most 1000)")
		fs.BoolVar(&c.follow, "f", false, "follow: print new lines until the container stops or is removed (then say which)")
		fs.BoolVar(&c.follow, "follow", false, "same as -f")
	default:
		c.ext.register(c.name, fs)
	}
	c.fs = fs
	for {
		if err := fs.Parse(args); err != nil {
			c.parseErr = err
			if !errors.Is(err, flag.ErrHelp) {
				// The flag set printed err and the usage.
				c.parseErr = reportedUsage{"sandboxes " + c.name + ": " + err.Error()}
				c.json = c.json || wantsJSON(args)
			}
			return c
		}
		if fs.NArg() == 0 {
			return c
		}
		c.args = append(c.args, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
