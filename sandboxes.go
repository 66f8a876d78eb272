package main

import (
	"bufio"
	"bytes"
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
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

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
                                                 the container stops
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
  --json          print the API's JSON as is, for scripts

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
		return false, nil
	}
	c := &sandboxesCmd{name: args[0], stdout: stdout, stderr: stderr}
	return true, sandboxesCmds[args[0]](c.parse(args[1:]))
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
	fs.StringVar(&c.config, "config", os.Getenv("PREVIEWGATE_CONFIG"), "config `file` whose listen.admin to use (default $PREVIEWGATE_CONFIG)")
	fs.BoolVar(&c.json, "json", false, "print the API's JSON as is")
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
		fs.BoolVar(&c.follow, "f", false, "follow: print new lines until the container stops")
		fs.BoolVar(&c.follow, "follow", false, "same as -f")
	default:
		c.ext.register(c.name, fs)
	}
	c.fs = fs
	for {
		if err := parseFlags(fs, args); err != nil {
			c.parseErr = err
			return c
		}
		if fs.NArg() == 0 {
			return c
		}
		c.args = append(c.args, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// connect checks the command line (want positional arguments) and finds
// the token and the admin listener.
func (c *sandboxesCmd) connect(want int) error {
	if c.parseErr != nil {
		return c.parseErr
	}
	if len(c.args) != want {
		c.fs.Usage()
		return errFlags
	}
	if want == 1 && !config.ValidID(c.args[0]) {
		return fmt.Errorf("sandboxes %s: malformed sandbox id %q (allowed: lowercase letters, digits, inner hyphens, 1-%d characters)", c.name, c.args[0], config.MaxIDLen)
	}
	if c.token == "" {
		c.token = os.Getenv(tokenEnv)
	}
	if c.token == "" {
		return fmt.Errorf("sandboxes %s: no API token: pass --token or set $%s (an api_tokens entry with scope sandboxes, or the admin token)", c.name, tokenEnv)
	}
	if c.admin != "" {
		base, err := adminBase(c.admin)
		if err != nil {
			return fmt.Errorf("sandboxes %s: --admin %q: %w", c.name, c.admin, err)
		}
		c.base = base
		if c.config != "" {
			// Only for up's sandbox host: the address is the flag's.
			c.cfg, _, _ = config.LoadPartial(c.config)
		}
	} else {
		addr, cfg, err := findAdmin(c.fs, c.config)
		if err != nil {
			return fmt.Errorf("sandboxes %s: %w", c.name, err)
		}
		c.base, c.cfg = "http://"+dialAddr(addr), cfg
	}
	// No overall timeout: up waits as long as the template's ready
	// timeout, and logs -f as long as the container runs.
	c.hc = &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 0,
	}}
	return nil
}

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

// apiError is an answer of the admin API other than 2xx.
type apiError struct {
	Status int
	Msg    string   // the API's "error", or the status line
	Code   string   // the API's "code"
	Logs   []string // a failed start's last output
}

func (e *apiError) Error() string {
	s := e.Msg
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Status == http.StatusUnauthorized {
		s += "; check --token or $" + tokenEnv + ": an api_tokens entry with scope sandboxes, or the admin token"
	}
	if len(e.Logs) > 0 {
		s += "\nits last output:\n  " + strings.Join(e.Logs, "\n  ")
	}
	return s
}

// maxAnswer bounds an admin API answer the CLI reads whole.
const maxAnswer = 16 << 20

// call sends method path (with a JSON body if body is not nil) and returns
// the answer of a 2xx, else an *apiError; a connection that fails says
// which address it tried and how to set another.
func (c *sandboxesCmd) call(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		how := "--admin URL, $" + adminEnv + ", or --config FILE (its listen.admin)"
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("no gateway answers at %s (connection refused): is `%s serve` running there? Set the admin listener with %s", c.base, invokedAs(), how)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("admin API at %s: %w (set it with %s)", c.base, err, how)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	var e struct {
		Error string   `json:"error"`
		Code  string   `json:"code"`
		Logs  []string `json:"logs"`
	}
	ae := &apiError{Status: resp.StatusCode}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		ae.Msg, ae.Code, ae.Logs = e.Error, e.Code, e.Logs
	} else {
		ae.Msg = fmt.Sprintf("%s answered %s", c.base, resp.Status)
	}
	return nil, ae
}

// get calls and reads the whole answer.
func (c *sandboxesCmd) get(method, path string, body any, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := c.call(ctx, method, path, body)
	if err != nil {
		return nil, fmt.Errorf("sandboxes %s: %w", c.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("sandboxes %s: reading the answer: %w", c.name, err)
	}
	return b, nil
}

// callTimeout bounds the calls that do not wait for a sandbox (up does,
// logs -f streams).
const callTimeout = 2 * time.Minute

// sandboxPath is /admin/sandboxes/ID plus more.
func sandboxPath(id, more string) string {
	return "/admin/sandboxes/" + url.PathEscape(id) + more
}

// sandboxRow is what ls shows of GET /admin/sandboxes.
type sandboxRow struct {
	ID           string    `json:"id"`
	Template     string    `json:"template"`
	State        string    `json:"state"`
	Container    string    `json:"container"`
	StartedAt    time.Time `json:"started_at"`
	LastActivity time.Time `json:"last_activity"`
	LastFailure  *struct {
		Reason   string `json:"reason"`
		ExitCode *int   `json:"exit_code"`
	} `json:"last_failure"`
}

// state is the STATE column: a sandbox that is not running says why its
// last start failed, as the API's last_failure and the admin page do.
func (r sandboxRow) state() string {
	f := r.LastFailure
	if f == nil || r.State == "running" {
		return dash(r.State)
	}
	if f.ExitCode != nil {
		return fmt.Sprintf("%s (%s, code %d)", dash(r.State), f.Reason, *f.ExitCode)
	}
	return fmt.Sprintf("%s (%s)", dash(r.State), f.Reason)
}

func sbxList(c *sandboxesCmd) error {
	if err := c.connect(0); err != nil {
		return err
	}
	b, err := c.get("GET", "/admin/sandboxes"+c.listQuery(), nil, callTimeout)
	if err != nil {
		return err
	}
	if c.json {
		_, err = c.stdout.Write(b)
		return err
	}
	var rows []sandboxRow
	var extra []lsExtra
	if err := json.Unmarshal(b, &rows); err != nil {
		return fmt.Errorf("sandboxes ls: the answer is not a list of sandboxes: %w", err)
	}
	if err := json.Unmarshal(b, &extra); err != nil || len(extra) != len(rows) {
		return fmt.Errorf("sandboxes ls: the answer is not a list of sandboxes: %w", err)
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.stdout, "no sandboxes")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTEMPLATE\tSTATE\tSTARTED\tLAST ACTIVITY\tCONTAINER"+lsColumns)
	for i, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s%s\n", r.ID, dash(r.Template), r.state(),
			ago(now, r.StartedAt), ago(now, r.LastActivity), dash(shortContainer(r.Container)), extra[i].columns(now))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortContainer shortens a Docker container id as docker ps does; other
// runtimes' names stay whole.
func shortContainer(s string) string {
	if len(s) == 64 && strings.Trim(s, "0123456789abcdef") == "" {
		return s[:12]
	}
	return s
}

// ago says how long before now t was, in the largest unit that fits.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

// upTimeout bounds up's wait; the gateway itself gives up after the
// template's ready timeout plus 30s.
const upTimeout = 30 * time.Minute

func sbxUp(c *sandboxesCmd) error {
	if err := c.connect(1); err != nil {
		return err
	}
	id := c.args[0]
	var body any
	if c.template != "" || len(c.metadata) > 0 || len(c.env) > 0 {
		body = map[string]any{"template": c.template, "metadata": map[string]string(c.metadata), "env": map[string]string(c.env)}
	}
	b, err := c.get("PUT", sandboxPath(id, ""), body, upTimeout)
	if err != nil {
		return err
	}
	if c.json {
		_, err = c.stdout.Write(b)
		return err
	}
	var r struct {
		Template string  `json:"template"`
		State    string  `json:"state"`
		Took     float64 `json:"took_seconds"`
		URL      string  `json:"url"`
		Created  *bool   `json:"created"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("sandboxes up: unexpected answer: %w", err)
	}
	fmt.Fprintf(c.stdout, "sandbox %s %s (template %s, took %s)\n", id, dash(r.State), dash(r.Template),
		time.Duration(r.Took*float64(time.Second)).Round(time.Millisecond))
	if body != nil && r.Created != nil && !*r.Created {
		fmt.Fprintf(c.stderr, "note: sandbox %s already existed (or another call was creating it): it keeps its own template, env and metadata; --template, --env and --metadata apply to a sandbox up creates\n", id)
	}
	switch {
	case r.URL != "":
		fmt.Fprintln(c.stdout, r.URL)
	case c.cfg != nil && len(c.cfg.Domains) > 0:
		// The host only: which scheme and port reach the gateway from
		// here the config cannot say (a load balancer, a port mapping).
		fmt.Fprintln(c.stdout, config.SandboxPrefix+id+"."+c.cfg.Domains[0])
	}
	return nil
}

func sbxStop(c *sandboxesCmd) error { return c.op("POST", "/stop", "stopped") }

func sbxRemove(c *sandboxesCmd) error { return c.op("DELETE", "", "removed") }

// op is stop and rm: one call, then "sandbox ID done".
func (c *sandboxesCmd) op(method, more, done string) error {
	if err := c.connect(1); err != nil {
		return err
	}
	b, err := c.get(method, sandboxPath(c.args[0], more), nil, callTimeout)
	if err != nil {
		return err
	}
	if c.json {
		_, err = c.stdout.Write(b)
		return err
	}
	fmt.Fprintf(c.stdout, "sandbox %s %s\n", c.args[0], done)
	return nil
}

func sbxLogs(c *sandboxesCmd) error {
	if err := c.connect(1); err != nil {
		return err
	}
	if c.tail < 0 {
		return usageError("sandboxes logs: --tail must be 0 or more")
	}
	id := c.args[0]
	q := "?tail=" + strconv.Itoa(c.tail)
	if !c.follow {
		b, err := c.get("GET", sandboxPath(id, "/logs"+q), nil, callTimeout)
		if err != nil {
			return err
		}
		if c.json {
			_, err = c.stdout.Write(b)
			return err
		}
		var r struct {
			Lines []string `json:"lines"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("sandboxes logs: unexpected answer: %w", err)
		}
		for _, l := range r.Lines {
			fmt.Fprintln(c.stdout, l)
		}
		return nil
	}
	resp, err := c.call(context.Background(), "GET", sandboxPath(id, "/logs"+q+"&follow=1"), nil)
	if err != nil {
		return fmt.Errorf("sandboxes logs: %w", err)
	}
	defer resp.Body.Close()
	return c.followStream(resp.Body)
}

// maxLogEvent bounds one event of the followed log stream.
const maxLogEvent = 1 << 20

// followStream prints the lines of a logs?follow=1 stream (SSE: one JSON
// string per event, "event: end" when the container stopped, "event:
// error" when following failed); with --json each event's JSON string, one
// a line.
func (c *sandboxesCmd) followStream(body io.Reader) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxLogEvent)
	event, data := "", ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event:"); ok {
			event = strings.TrimSpace(v)
			continue
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = strings.TrimPrefix(v, " ")
			continue
		}
		if line != "" {
			continue // comments and fields we do not use
		}
		switch event {
		case "end":
			if !c.json {
				fmt.Fprintf(c.stderr, "sandbox %s stopped\n", c.args[0])
			}
			return nil
		case "error":
			var msg string
			if json.Unmarshal([]byte(data), &msg) != nil {
				msg = data
			}
			return fmt.Errorf("sandboxes logs: following stopped: %s", msg)
		case "":
			if data == "" {
				break
			}
			if c.json {
				fmt.Fprintln(c.stdout, data)
				break
			}
			var l string
			if err := json.Unmarshal([]byte(data), &l); err != nil {
				return fmt.Errorf("sandboxes logs: unexpected event %.100q", data)
			}
			fmt.Fprintln(c.stdout, l)
		}
		event, data = "", ""
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sandboxes logs: the stream broke: %w", err)
	}
	return errors.New("sandboxes logs: the gateway ended the stream before the container stopped")
}
