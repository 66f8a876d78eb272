package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/previewgate/previewgate/config"
)

// Flags, exit statuses, and the environment the commands read: the one
// place that reads it.

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
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(out, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
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

// configEnv names the config file when --config is not given (the image
// sets it). Every command that reads the file (serve, config validate
// without FILE, token mint, ca export, healthcheck, sandboxes) finds it
// with configFlag, so in one
// environment they all read the same file: token mint signing with
// another key than serve verifies with was a token answered 401.
const configEnv = "PREVIEWGATE_CONFIG"

// configFlag adds --config to fs, kept in p: the config file, default
// $PREVIEWGATE_CONFIG. An empty path (neither is set, or --config "") is
// no file: the command does what none says. usage says what the file is
// for.
func configFlag(fs *flag.FlagSet, p *string, usage, none string) {
	fs.StringVar(p, "config", os.Getenv(configEnv), usage+" (default $"+configEnv+"; none, or --config '': "+none+")")
}

// fromConfigEnv says whether $PREVIEWGATE_CONFIG chose path: fs's
// --config was not given, and the variable names a file.
func fromConfigEnv(fs *flag.FlagSet, path string) bool {
	return path != "" && !isSet(fs, "config")
}

// configEnvError wraps err, a failure to read the config file at path
// that $PREVIEWGATE_CONFIG chose, with where the path came from: the
// command line named no file, and a shell or an image may set the
// variable.
func configEnvError(path string, err error) error {
	return fmt.Errorf("%w\n($%s names %s; --config FILE reads another file, --config '' none)", err, configEnv, path)
}

// isSet says whether the command line gave fs's flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// findAdmin says where the admin listener of the running gateway is, for
// the commands that talk to it (healthcheck, sandboxes): listen.admin of
// an explicit --config (fs's "config" flag); else $PREVIEWGATE_ADMIN_ADDR
// if set; else listen.admin of cfgPath (the flag's default,
// $PREVIEWGATE_CONFIG); else the development default's. cfg is the file
// read, nil when none was. Environment variables the address does not
// need (admin_token's) may be unset.
func findAdmin(fs *flag.FlagSet, cfgPath string) (addr string, cfg *config.Config, err error) {
	explicit := isSet(fs, "config")
	env, err := envAdminAddr()
	if err != nil {
		return "", nil, err
	}
	switch {
	case env != "" && !explicit:
		return env, nil, nil
	case cfgPath != "":
		cfg, err := loadPartial(cfgPath)
		if err != nil {
			return "", nil, err
		}
		return cfg.Listen.Admin, cfg, nil
	}
	return config.DevListenAdmin, nil, nil
}

// loadPartial is config.LoadPartial, its failure naming the environment
// variables it read as empty.
func loadPartial(path string) (*config.Config, error) {
	cfg, unset, err := config.LoadPartial(path)
	if err != nil && len(unset) > 0 {
		err = fmt.Errorf("%w\n(read as empty: unset environment variable(s) %s)", err, strings.Join(unset, ", "))
	}
	return cfg, err
}

// dialAddr turns a listen address into one to connect to: a wildcard
// host (":9090", "0.0.0.0:9090", "[::]:9090") becomes loopback.
func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}

// adminEnv, when set, moves the admin listener for serve and tells
// healthcheck where it is: in a container the health check runs as a
// separate process that cannot see serve's flags.
const adminEnv = "PREVIEWGATE_ADMIN_ADDR"

// envAdminAddr returns $PREVIEWGATE_ADMIN_ADDR, "" if unset. A value that
// is no listen address is an error that does not repeat it: a token pasted
// into the wrong variable must not end up in a log.
func envAdminAddr() (string, error) {
	v := os.Getenv(adminEnv)
	if v == "" {
		return "", nil
	}
	if err := config.CheckAddr(v); err != nil {
		return "", fmt.Errorf("$%s is not a listen address such as 127.0.0.1:9090 (its value is not shown)", adminEnv)
	}
	return v, nil
}

// tokenEnv holds the token of the sandboxes commands when --token is not given.
const tokenEnv = "PREVIEWGATE_TOKEN"
