// Package cli is previewgate's command line: its subcommands, their
// flags, usage texts and exit statuses. It is the one place that reads
// the environment ($PREVIEWGATE_CONFIG, $PREVIEWGATE_TOKEN,
// $PREVIEWGATE_ADMIN_ADDR) and hands what it read down as options;
// serving is internal/app's, the admin API's calls adminapi's.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/previewgate/previewgate/demoapp"
)

// version is the binary's, set by Main.
var version = "dev"

const usage = `previewgate — a gateway in front of development sandboxes

usage:
  previewgate serve [--config FILE] [--http ADDR] [--https ADDR] [--admin ADDR]
                    [--domain NAME] [--label KEY=VALUE]...
                                          run the gateway (no --config nor $PREVIEWGATE_CONFIG:
                                          the development default)
  previewgate config init [FILE]          write a commented starter config (default previewgate.yaml)
  previewgate config validate [FILE]      check a config file (no FILE: --config, else
                                          $PREVIEWGATE_CONFIG)
  previewgate token mint --sandbox ID [--ttl 15m] [--template NAME] [--subject WHO]
                    [--kid KID] [--config FILE] [--url]
                                          print a signed access token and the preview URL
                                          (--url: only the URL; no --config nor
                                          $PREVIEWGATE_CONFIG: the development key
                                          kept in ./previewgate-data)
  previewgate ca export [--config FILE]   print the local CA (tls.mode self-signed)
  previewgate healthcheck [--config FILE] [--url URL]
                                          exit 0 if the admin /healthz answers (container health
                                          checks; default: listen.admin of $PREVIEWGATE_CONFIG)
  previewgate sandboxes ls|up|stop|rm|logs [ID] [--token TOKEN] [--admin URL] [--json]
                                          the admin API's sandbox calls from a terminal
                                          ("sandboxes --help": subcommands and flags)
  previewgate version                     print the version (also --version)

"previewgate COMMAND --help" shows a command's flags.
`

// Usage of the command groups, for "previewgate config" and the like.
const (
	configUsage = `usage:
  previewgate config init [FILE]          write a commented starter config (default previewgate.yaml)
  previewgate config validate [FILE]      check a config file (no FILE: --config, else
                                          $PREVIEWGATE_CONFIG)
`
	tokenUsage = `usage:
  previewgate token mint --sandbox ID [flags]   print a signed access token ("token mint --help": flags)
`
	caUsage = `usage:
  previewgate ca export [--config FILE]   print the local CA (tls.mode self-signed)
`
)

// Main runs the command line args (os.Args: args[0] is the command as
// invoked) of the binary of version v and returns its exit status.
func Main(args []string, v string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		argv0 = args[0]
	}
	version = v
	return run(args[1:], stdout, stderr)
}

// command is a row of the command table: its name as typed, what runs
// it, and its subcommands.
type command struct {
	name    string
	aliases []string // other names it answers to
	// run runs the command with the arguments after its name. A command
	// with subcommands runs when none is named ("sandboxes link ID");
	// without run it is a group, which prints usage then.
	run  func(args []string, stdout, stderr io.Writer) error
	subs []*command
	// usage is a group's usage text.
	usage string
	// noSub, if set, is what the group answers with --json when no
	// subcommand is named: a JSON error object on stdout, besides usage.
	noSub string
}

// commands is the command line, read top to bottom: every command and
// subcommand, and what runs it. The sandboxes subcommands share their
// flags and client (sbx, sandboxes.go).
func commands() []*command {
	return []*command{
		{name: "serve", run: serve},
		{name: "config", usage: configUsage, subs: []*command{
			{name: "init", run: configInit},
			{name: "validate", run: validate},
		}},
		{name: "token", usage: tokenUsage, subs: []*command{
			{name: "mint", run: mint},
		}},
		{name: "ca", usage: caUsage, subs: []*command{
			{name: "export", run: caExport},
		}},
		{name: "healthcheck", run: healthcheck},
		{name: "sandboxes", usage: sandboxesUsage, noSub: "no subcommand (ls, up, show, stop, rm, logs, ...)", subs: []*command{
			sbx("ls", 0, "sandboxes ls [flags]   (list sandboxes)", lsFlags, sbxList),
			sbx("up", 1, "sandboxes up ID [--template NAME] [flags]   (create or wake ID, wait until ready)", upFlags, sbxUp),
			sbx("show", 1, "sandboxes show ID [flags]   (one sandbox: state, activity, why it is up, settings)", nil, sbxShow),
			sbx("stop", 1, "sandboxes stop ID [flags]   (stop ID; the next request wakes it)", nil, sbxStop),
			sbx("rm", 1, "sandboxes rm ID [flags]   (remove ID's container)", nil, sbxRemove),
			sbx("pause", 1, "sandboxes pause ID [flags]   (pause ID, memory kept; Docker only)", nil, sbxPause),
			sbx("resume", 1, "sandboxes resume ID [flags]   (unpause or start ID, wait until ready)", nil, sbxResume),
			sbx("requests", 1, "sandboxes requests ID [--n N] [flags]   (ID's last requests, newest first)", requestsFlags, sbxRequests),
			sbx("logs", 1, "sandboxes logs ID [-f] [--tail N] [flags]   (print ID's output; -f follows it)", logsFlags, sbxLogs),
			sbx("set", 1, "sandboxes set ID [--public true|false|default] [--keep-up 2h | --keep-up-until TIME] [flags]   (per-sandbox settings)", setFlags, sbxSet),
			sbx("link", 1, "sandboxes link ID [--ttl 10m] [--port N] [--path /x] [flags]   (mint a share link)", linkFlags, sbxLinkNew,
				sbx("link ls", 1, "sandboxes link ls ID [flags]   (list ID's share links)", nil, sbxLinkList),
				sbx("link rm", 2, "sandboxes link rm ID LINKID [flags]   (revoke a share link)", nil, sbxLinkRemove)),
		}},
		{name: "version", aliases: []string{"--version", "-version"}, run: printVersion},
		// The demo image's app (the development default's template): not
		// for people, not in the usage.
		{name: "demo-app", run: demoApp},
	}
}

// run is the command line: exit 0 on success and for --help, 1 when the
// command failed, 2 for a command line it cannot read.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd := find(commands(), args[0])
	switch {
	case cmd == nil && isHelp(args[0]):
		fmt.Fprint(stdout, usage)
		return 0
	case cmd == nil:
		fmt.Fprintf(stderr, "previewgate: unknown command %q\n\n%s", strings.Join(args, " "), usage)
		return 2
	}
	rest := args[1:]
	for len(rest) > 0 {
		sub := find(cmd.subs, rest[0])
		if sub == nil {
			break
		}
		cmd, rest = sub, rest[1:]
	}
	if cmd.run == nil {
		return cmd.group(args, rest, stdout, stderr)
	}
	return exitStatus(cmd.run(rest, stdout, stderr), stderr)
}

// find is the command of cmds named name.
func find(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name || slices.Contains(c.aliases, name) {
			return c
		}
	}
	return nil
}

// exitStatus reports err, if the command has not, and says the exit status.
func exitStatus(err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0 // the flag set printed its usage
	case errors.Is(err, errFlags):
		return 2 // the flag set printed the error and its usage
	case errors.Is(err, errReported):
		return 1 // the command printed what went wrong
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "previewgate:", err)
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "previewgate:", err)
		return 1
	}
	return 0
}

// group answers a command group named without a known subcommand
// ("config", "token --help"): its usage on stdout and 0 when help was asked
// for, else on stderr and 2. args is the whole command line, rest what
// follows the group's name.
func (c *command) group(args, rest []string, stdout, stderr io.Writer) int {
	if c.noSub != "" && wantsJSON(rest) && !(len(rest) == 1 && isHelp(rest[0])) {
		msg := c.name + ": " + c.noSub
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			msg = fmt.Sprintf("%s: unknown subcommand %q", c.name, rest[0])
		}
		stdout.Write(jsonError(usageError(msg)))
	}
	if len(args) == 2 && isHelp(args[1]) {
		fmt.Fprint(stdout, c.usage)
		return 0
	}
	if len(args) > 1 {
		fmt.Fprintf(stderr, "previewgate: unknown command %q\n\n", strings.Join(args, " "))
	}
	fmt.Fprint(stderr, c.usage)
	return 2
}

func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

func printVersion(_ []string, stdout, _ io.Writer) error {
	fmt.Fprintln(stdout, "previewgate", version)
	return nil
}

// demoApp serves the demo app on :3000 until SIGINT or SIGTERM.
func demoApp(_ []string, _, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return demoapp.Serve(ctx, ":3000", slog.New(slog.NewTextHandler(stderr, nil)))
}
