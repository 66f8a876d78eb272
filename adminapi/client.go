package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// Client makes the admin API's calls. An answer other than 2xx comes
// back as an *Error; a call that got no answer as http.Client's error (a
// *url.Error). Every method honors ctx, and the calls that wait for a
// sandbox (PutSandbox, ResumeSandbox) wait as long as the API does, the
// template's ready timeout plus 30 s, unless ctx ends first: the API then
// answers 504 not_ready, which says more than a client giving up.
type Client struct {
	// BaseURL is the admin listener, e.g. http://127.0.0.1:9090.
	BaseURL string
	// Token is an api_tokens entry with scope sandboxes, or the admin
	// token (the config calls take the admin token only).
	Token string
	// HTTPClient sends the calls; nil: http.DefaultClient. An overall
	// Timeout on it would cut the waits and FollowLogs: bound calls with
	// ctx instead.
	HTTPClient *http.Client
}

// MaxAnswer bounds an answer the Client reads whole.
const MaxAnswer = 16 << 20

// ListSandboxes lists the sandboxes carrying every metadata pair given
// (none: all).
func (c *Client) ListSandboxes(ctx context.Context, metadata map[string]string) ([]Sandbox, error) {
	q := url.Values{}
	for k, v := range metadata {
		q.Set("metadata."+k, v)
	}
	path := "/admin/sandboxes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return do[[]Sandbox](ctx, c, http.MethodGet, path, nil)
}

// GetSandbox is sandbox id as the list has it, read from the runtime
// (404 not_found if there is none).
func (c *Client) GetSandbox(ctx context.Context, id string) (Sandbox, error) {
	return do[Sandbox](ctx, c, http.MethodGet, sandboxPath(id, ""), nil)
}

// PutSandbox creates or wakes sandbox id and waits until its app answers.
func (c *Client) PutSandbox(ctx context.Context, id string, req PutRequest) (PutResult, error) {
	return do[PutResult](ctx, c, http.MethodPut, sandboxPath(id, ""), req)
}

// StopSandbox stops id; the next request or PutSandbox wakes it.
func (c *Client) StopSandbox(ctx context.Context, id string) (Stopped, error) {
	return do[Stopped](ctx, c, http.MethodPost, sandboxPath(id, "/stop"), nil)
}

// RemoveSandbox removes id's container (or pod), settings and links.
func (c *Client) RemoveSandbox(ctx context.Context, id string) (Removed, error) {
	return do[Removed](ctx, c, http.MethodDelete, sandboxPath(id, ""), nil)
}

// PauseSandbox pauses id, keeping its memory (Docker; Kubernetes answers
// 409 pause_unsupported).
func (c *Client) PauseSandbox(ctx context.Context, id string) (Paused, error) {
	return do[Paused](ctx, c, http.MethodPost, sandboxPath(id, "/pause"), nil)
}

// ResumeSandbox unpauses or starts id, never creating it, and waits until
// its app answers.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (Resumed, error) {
	return do[Resumed](ctx, c, http.MethodPost, sandboxPath(id, "/resume"), nil)
}

// PatchSettings changes id's settings and answers them as written.
func (c *Client) PatchSettings(ctx context.Context, id string, p SettingsPatch) (Settings, error) {
	return do[Settings](ctx, c, http.MethodPatch, sandboxPath(id, ""), p)
}

// CreateLink mints a share link to id; its URL holds the secret and is
// answered this once.
func (c *Client) CreateLink(ctx context.Context, id string, req LinkRequest) (Link, error) {
	return do[Link](ctx, c, http.MethodPost, sandboxPath(id, "/links"), req)
}

// ListLinks lists id's links, never their secrets.
func (c *Client) ListLinks(ctx context.Context, id string) (Links, error) {
	return do[Links](ctx, c, http.MethodGet, sandboxPath(id, "/links"), nil)
}

// RevokeLink revokes id's link linkID on every replica.
func (c *Client) RevokeLink(ctx context.Context, id, linkID string) (LinkRevoked, error) {
	return do[LinkRevoked](ctx, c, http.MethodDelete, sandboxPath(id, "/links/"+url.PathEscape(linkID)), nil)
}

// Requests is id's last n requests through the replica that answers,
// newest first (n ≤ 0: all it keeps).
func (c *Client) Requests(ctx context.Context, id string, n int) (RequestLog, error) {
	path := sandboxPath(id, "/requests")
	if n > 0 {
		path += "?n=" + strconv.Itoa(n)
	}
	return do[RequestLog](ctx, c, http.MethodGet, path, nil)
}

// Logs is id's last tail lines of output (at most 1000; 0: none).
func (c *Client) Logs(ctx context.Context, id string, tail int) (Logs, error) {
	return do[Logs](ctx, c, http.MethodGet, sandboxPath(id, "/logs?tail="+strconv.Itoa(tail)), nil)
}

// Announce makes id's preview names worth an on-demand certificate for
// an hour before it exists (ACME on-demand only: else 409
// no_on_demand_tls).
func (c *Client) Announce(ctx context.Context, id string) (Announced, error) {
	return do[Announced](ctx, c, http.MethodPost, sandboxPath(id, "/announce"), nil)
}

// Config is the live config file, secrets redacted (admin token only).
func (c *Client) Config(ctx context.Context) ([]byte, error) {
	resp, err := c.send(ctx, http.MethodGet, "/admin/config", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readAnswer(resp.Body)
}

// ValidateConfig checks yaml as the new config file without applying it
// (400 invalid_config: the message lists every error as FILE:LINE:COL).
func (c *Client) ValidateConfig(ctx context.Context, yaml []byte) (ConfigValidation, error) {
	return do[ConfigValidation](ctx, c, http.MethodPost, "/admin/config/validate", rawBody(yaml))
}

// PutConfig validates yaml, applies it and writes the file (admin token
// only; 409 no_config_file on the development default).
func (c *Client) PutConfig(ctx context.Context, yaml []byte) (ConfigApplied, error) {
	return do[ConfigApplied](ctx, c, http.MethodPut, "/admin/config", rawBody(yaml))
}

// rawBody is a request body sent as it is, not as JSON.
type rawBody []byte

// sandboxPath is /admin/sandboxes/ID plus more.
func sandboxPath(id, more string) string {
	return "/admin/sandboxes/" + url.PathEscape(id) + more
}

// do sends the call and decodes its 2xx answer.
func do[T any](ctx context.Context, c *Client, method, path string, body any) (T, error) {
	var out T
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	b, err := readAnswer(resp.Body)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, &answerError{kind: ErrBadAnswer, msg: "unexpected answer: " + err.Error(), err: err}
	}
	return out, nil
}

func readAnswer(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return b, nil
}

// send sends method path with body (JSON unless a rawBody; none if nil)
// and returns a 2xx answer, else the *Error it is.
func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case rawBody:
		rd, ctype = bytes.NewReader(b), "application/yaml"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, c.readError(resp)
}

// readError reads an answer other than 2xx: the API's error object, or
// for anything else (a proxy's page) the status.
func (c *Client) readError(resp *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	var e Error
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		e.Status, e.Body = resp.StatusCode, b
		return &e
	}
	return &Error{Status: resp.StatusCode, Message: fmt.Sprintf("%s answered %s", c.BaseURL, resp.Status)}
}

// answerError is a failure of kind (ErrBadAnswer, ErrFollowFailed,
// ErrStreamBroken) saying msg, caused by err if not nil.
type answerError struct {
	kind, err error
	msg       string
}

func (e *answerError) Error() string { return e.msg }

func (e *answerError) Unwrap() []error {
	if e.err == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.err}
}
