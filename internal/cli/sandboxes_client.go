package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/previewgate/previewgate/config"
)

// The sandboxes commands' client: finding the admin listener, one call,
// and the API's errors.

// connect checks the command line (want positional arguments) and finds
// the token and the admin listener.
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
	if want == 1 && !config.ValidID(c.args[0]) {
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
	c.hc = &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialAdmin,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 0,
	}}
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

// apiError is an answer of the admin API other than 2xx.
type apiError struct {
	Status int
	Msg    string   // the API's "error", or the status line
	Code   string   // the API's "code"
	Logs   []string // a failed start's last output
	Body   []byte   // the answer as sent when it is a JSON object, else nil
}

// jsonBody is what --json prints of e on stdout: the API's JSON error
// object as sent, or, for an answer that is none (a proxy's page),
// {"error": Msg}; one line a script can parse either way.
func (e *apiError) jsonBody() []byte {
	b := e.Body
	if b == nil {
		b, _ = json.Marshal(map[string]string{"error": e.Msg})
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		b = append(b, '\n')
	}
	return b
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
			return nil, failed(codeUnreachable, fmt.Errorf("no gateway answers at %s (connection refused): is `%s serve` running there? Set the admin listener with %s", c.base, invokedAs(), how))
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		code := codeUnreachable
		if errorCode(err) == codeTimeout {
			code = codeTimeout
		}
		return nil, failed(code, fmt.Errorf("admin API at %s: %w (set it with %s)", c.base, err, how))
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
		ae.Msg, ae.Code, ae.Logs, ae.Body = e.Error, e.Code, e.Logs, b
	} else {
		ae.Msg = fmt.Sprintf("%s answered %s", c.base, resp.Status)
	}
	return nil, ae
}

// get calls and reads the whole answer, giving up after timeout
// (serverBounded: when the API answers).
func (c *sandboxesCmd) get(method, path string, body any, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if timeout != serverBounded {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
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

// sandboxPath is /admin/sandboxes/ID plus more.
func sandboxPath(id, more string) string {
	return "/admin/sandboxes/" + url.PathEscape(id) + more
}

// writeOr returns err, or writes the answer b as it came (--json).
func writeOr(c *sandboxesCmd, b []byte, err error) error {
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(b)
	return err
}
