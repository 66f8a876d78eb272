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
	"path/filepath"
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

// run is the command line: exit 0 on success and for --help, 1 when the
// command failed, 2 for a command line it cannot read.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	cmd, sub := args[0], ""
	if len(args) > 1 {
		sub = args[1]
	}
	switch {
	case cmd == "serve":
		err = serve(args[1:], stdout, stderr)
	case cmd == "config":
		switch sub {
		case "validate":
			err = validate(args[2:], stdout, stderr)
		case "init":
			err = configInit(args[2:], stdout, stderr)
		default:
			return group(configUsage, args, stdout, stderr)
		}
	case cmd == "token":
		if sub != "mint" {
			return group(tokenUsage, args, stdout, stderr)
		}
		err = mint(args[2:], stdout, stderr)
	case cmd == "ca":
		if sub != "export" {
			return group(caUsage, args, stdout, stderr)
		}
		err = caExport(args[2:], stdout, stderr)
	case cmd == "sandboxes":
		var ok bool
		if ok, err = sandboxesMain(args[1:], stdout, stderr); !ok {
			return group(sandboxesUsage, args, stdout, stderr)
		}
	case cmd == "healthcheck":
		err = healthcheck(args[1:], stdout, stderr)
	case cmd == "version" || cmd == "--version" || cmd == "-version":
		fmt.Fprintln(stdout, "previewgate", version)
	case cmd == "demo-app":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = demoapp.Serve(ctx, ":3000", slog.New(slog.NewTextHandler(stderr, nil)))
	case isHelp(cmd):
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "previewgate: unknown command %q\n\n%s", strings.Join(args, " "), usage)
		return 2
	}
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

// group answers a command group without a known subcommand ("config",
// "token --help"): its usage on stdout and 0 when help was asked for,
// else on stderr and 2.
func group(u string, args []string, stdout, stderr io.Writer) int {
	if len(args) == 2 && isHelp(args[1]) {
		fmt.Fprint(stdout, u)
		return 0
	}
	if len(args) > 1 {
		fmt.Fprintf(stderr, "previewgate: unknown command %q\n\n", strings.Join(args, " "))
	}
	fmt.Fprint(stderr, u)
	return 2
}

func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

// errReported: the command failed and has printed why.
var errReported = errors.New("failed")

// errFlags: a flag set could not parse its arguments and said why.
var errFlags = errors.New("bad flags")

// parseFlags parses args into fs: flag.ErrHelp for -h/--help, errFlags
// for anything it cannot read (both already printed), else nil.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errFlags
}

// usageError is a command line a command cannot read (exit 2).
type usageError string

func (e usageError) Error() string { return string(e) }

// newFlagSet is a subcommand's flag set: errors and usage go to stderr
// unless help was asked for, then to stdout (help is an answer, not an error).
func newFlagSet(name, synopsis string, args []string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	out := stderr
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			out = stdout
		}
	}
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: previewgate %s\n", synopsis)
		if hasFlags(fs) {
			fmt.Fprintln(out, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// argv0 is the command as invoked (os.Args[0]); tests set it.
var argv0 = "previewgate"

// invokedAs is the command to put in hints: the way the user ran this one,
// so someone who ran `go run . serve` is not told `previewgate token mint`
// (#24, 5). go run builds into a go-build temporary directory, whose path
// means nothing to the user.
func invokedAs() string {
	a := filepath.ToSlash(argv0)
	switch {
	case a == "":
		return "previewgate"
	case strings.Contains(a, "/go-build") || strings.Contains(a, "/exe/"):
		return "go run ."
	}
	return argv0
}
