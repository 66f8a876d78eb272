package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
)

// The sandboxes commands: the admin API's /admin/sandboxes calls from a
// terminal through adminapi.Client, tables for people and the API's JSON
// for scripts (#23).

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

// sandboxesCmd is one sandboxes subcommand: its flags, then its client.
type sandboxesCmd struct {
	name           string // "link ls"
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
	ttl, path            string   // link
	port                 int      // link
	public, keepUp       string   // set
	keepUpUntil          string   // set

	parseErr error
	cfg      *config.Config // the config file read, if any (up prints its sandbox host)
	base     string         // the admin listener, http://host:port
	api      *adminapi.Client
}

// sbx is the row of the command table of sandboxes subcommand name
// ("link ls"): how many positional arguments it takes, its flag set's
// synopsis, its own flags besides those of every subcommand (nil: none),
// what it does once connected, and its subcommands.
func sbx(name string, nargs int, synopsis string, flags func(*sandboxesCmd, *flag.FlagSet), do func(*sandboxesCmd) error, subs ...*command) *command {
	words := strings.Fields(name)
	return &command{name: words[len(words)-1], subs: subs, run: func(args []string, stdout, stderr io.Writer) error {
		c := &sandboxesCmd{name: name, stdout: stdout, stderr: stderr}
		return c.parse(args, synopsis, flags).run(nargs, do)
	}}
}

func lsFlags(c *sandboxesCmd, fs *flag.FlagSet) {
	c.metadata = metaFlag{}
	fs.Var(c.metadata, "metadata", "list only sandboxes with metadata `KEY=VALUE` (repeat: all must match)")
}

func upFlags(c *sandboxesCmd, fs *flag.FlagSet) {
	fs.StringVar(&c.template, "template", "", "template to create the sandbox from (default: the config's default_template)")
	c.metadata = metaFlag{}
	fs.Var(c.metadata, "metadata", "`KEY=VALUE` metadata of a sandbox this creates (repeat for more)")
	c.env = metaFlag{}
	fs.Var(c.env, "env", "`NAME=VALUE` environment of a sandbox this creates; NAME must be in the template's allow_env (repeat for more)")
}

func requestsFlags(c *sandboxesCmd, fs *flag.FlagSet) {
	fs.IntVar(&c.n, "n", 0, "how many of the last requests to print (default: all kept)")
}

func logsFlags(c *sandboxesCmd, fs *flag.FlagSet) {
	fs.IntVar(&c.tail, "tail", 100, "how many of the last lines to print (at most 1000)")
	fs.BoolVar(&c.follow, "f", false, "follow: print new lines until the container stops or is removed (then say which)")
	fs.BoolVar(&c.follow, "follow", false, "same as -f")
}

func setFlags(c *sandboxesCmd, fs *flag.FlagSet) {
	fs.StringVar(&c.public, "public", "", "true, false, or default (the template's)")
	fs.StringVar(&c.keepUp, "keep-up", "", "keep it running this long from now whatever its traffic, e.g. 2h (0s ends it)")
	fs.StringVar(&c.keepUpUntil, "keep-up-until", "", "the same until an RFC 3339 time, e.g. 2026-11-27T18:00:00Z (none ends it)")
}

func linkFlags(c *sandboxesCmd, fs *flag.FlagSet) {
	fs.StringVar(&c.ttl, "ttl", "", "the link's lifetime, e.g. 10m (default: the gateway's auth.link_ttl)")
	fs.IntVar(&c.port, "port", 0, "the sandbox port it opens (default: its template's port)")
	fs.StringVar(&c.path, "path", "", "the path prefix it opens, and lands on (default /)")
}

// parse reads the subcommand's flags, before and after its positional
// arguments ("up ID --template app"); errors are kept for the subcommand.
func (c *sandboxesCmd) parse(args []string, synopsis string, flags func(*sandboxesCmd, *flag.FlagSet)) *sandboxesCmd {
	fs := newFlagSet("sandboxes "+c.name, synopsis, args, c.stdout, c.stderr)
	fs.StringVar(&c.token, "token", "", "API token: an api_tokens entry with scope sandboxes, or the admin token (default $"+tokenEnv+")")
	fs.StringVar(&c.admin, "admin", "", "admin listener `URL` (default: listen.admin of an explicit --config; else $"+adminEnv+"; else listen.admin of $PREVIEWGATE_CONFIG; else "+config.DevListenAdmin+")")
	configFlag(fs, &c.config, "config `file` whose listen.admin (and domain, for up) to use", "see --admin")
	fs.BoolVar(&c.json, "json", false, "print the API's JSON as is; any failure as one JSON error object {\"error\", \"code\"}")
	if flags != nil {
		flags(c, fs)
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

// run connects (nargs positional arguments) and runs the subcommand do.
// With --json any failure also goes to stdout as one JSON error object
// (sandboxes_errors.go): the API's as it sent it, else the CLI's own in
// the same shape. A script reading stdout gets something to parse; the
// message is on stderr and the exit status as without --json.
func (c *sandboxesCmd) run(nargs int, do func(*sandboxesCmd) error) error {
	err := c.connect(nargs)
	if err == nil {
		err = do(c)
	}
	if err == nil || !c.json || errors.Is(err, flag.ErrHelp) {
		return err
	}
	if _, werr := c.stdout.Write(jsonError(err)); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// connect checks the command line (want positional arguments), finds the
// token and the admin listener, and makes the client.
func (c *sandboxesCmd) connect(want int) error {
	if c.parseErr != nil {
		return c.parseErr
	}
	if len(c.args) != want {
		msg := fmt.Sprintf("sandboxes %s: want %d argument(s), got %d", c.name, want, len(c.args))
		fmt.Fprintln(c.fs.Output(), msg)
		c.fs.Usage()
		return reportedUsage{msg}
	}
	if want >= 1 && !config.ValidID(c.args[0]) {
		return failed(codeBadID, fmt.Errorf("sandboxes %s: malformed sandbox id %q (allowed: lowercase letters, digits, inner hyphens, 1-%d characters)", c.name, c.args[0], config.MaxIDLen))
	}
	if c.token == "" {
		c.token = os.Getenv(tokenEnv)
	}
	if c.token == "" {
		return failed(codeNoToken, fmt.Errorf("sandboxes %s: no API token: pass --token or set $%s (an api_tokens entry with scope sandboxes, or the admin token)", c.name, tokenEnv))
	}
	if c.admin != "" {
		base, err := adminBase(c.admin)
		if err != nil {
			return failed(codeUsage, fmt.Errorf("sandboxes %s: --admin %q: %w", c.name, c.admin, err))
		}
		c.base = base
		if c.config != "" {
			// Only for up's sandbox host: the address is the flag's.
			c.cfg, _, _ = config.LoadPartial(c.config)
		}
	} else {
		addr, cfg, err := findAdmin(c.fs, c.config)
		if err != nil {
			return failed(codeConfig, fmt.Errorf("sandboxes %s: %w", c.name, err))
		}
		c.base, c.cfg = "http://"+dialAddr(addr), cfg
	}
	// No overall timeout: up waits as long as the template's ready
	// timeout, and logs -f as long as the container runs.
	c.api = &adminapi.Client{BaseURL: c.base, Token: c.token, HTTPClient: &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialAdmin,
		TLSHandshakeTimeout: 5 * time.Second,
	}}}
	return nil
}

// dialAdmin connects to the admin listener; a test swaps in an in-memory
// one to run the waits the server bounds in fake time.
var dialAdmin = (&net.Dialer{Timeout: 5 * time.Second}).DialContext

// adminBase reads --admin: a URL (http or https) or a bare host:port.
func adminBase(s string) (string, error) {
	if !strings.Contains(s, "://") {
		if err := config.CheckAddr(s); err != nil {
			return "", errors.New("want a URL such as http://127.0.0.1:9090 or an address such as 127.0.0.1:9090")
		}
		return "http://" + dialAddr(s), nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return "", errors.New("want a URL such as http://127.0.0.1:9090")
	}
	return strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/"), nil
}

// callTimeout bounds the calls that do not wait for a sandbox to become
// ready. The longest of them waits for the runtime: a Docker stop's 10 s
// before SIGKILL, a removal's 30 s for another one under way.
const callTimeout = 2 * time.Minute

// serverBounded is the timeout of the calls that wait for a sandbox to be
// ready (up, resume): none on the client. The API bounds that wait itself
// (the template's ready timeout plus 30 s, which only the server knows;
// for resume the sandbox's own template's) and then answers 504
// not_ready, which says what happened; a client giving up first (2 min
// for resume) made a slow start look like a client failure. logs -f
// streams until the output ends.
const serverBounded time.Duration = 0

// answer runs the subcommand's call, given up after timeout
// (serverBounded: when the API answers), and prints its answer: the
// API's JSON with --json (adminapi's types encode it as sent), else
// table. A failure is explained (explain).
func answer[T any](c *sandboxesCmd, timeout time.Duration, call func(context.Context) (T, error), table func(T) error) error {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if timeout != serverBounded {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	r, err := call(ctx)
	if err != nil {
		return c.explain(err)
	}
	if c.json {
		return json.NewEncoder(c.stdout).Encode(r)
	}
	return table(r)
}

// explain turns a call's failure into the subcommand's: the API's error
// object as it is (what --json prints), or why no answer came and how to
// point the CLI elsewhere.
func (c *sandboxesCmd) explain(err error) error {
	var ae *adminapi.Error
	var ue *url.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		err = fmt.Errorf("%w; check --token or $%s: an api_tokens entry with scope sandboxes, or the admin token", err, tokenEnv)
	case errors.Is(err, adminapi.ErrBadAnswer):
		err = failed(codeBadAnswer, err)
	case errors.As(err, &ue):
		how := "--admin URL, $" + adminEnv + ", or --config FILE (its listen.admin)"
		if errors.Is(err, syscall.ECONNREFUSED) {
			return failed(codeUnreachable, fmt.Errorf("sandboxes %s: no gateway answers at %s (connection refused): is `%s serve` running there? Set the admin listener with %s", c.name, c.base, invokedAs(), how))
		}
		code := codeUnreachable
		if errorCode(ue.Err) == codeTimeout {
			code = codeTimeout
		}
		return failed(code, fmt.Errorf("sandboxes %s: admin API at %s: %w (set it with %s)", c.name, c.base, ue.Err, how))
	}
	return fmt.Errorf("sandboxes %s: %w", c.name, err)
}
