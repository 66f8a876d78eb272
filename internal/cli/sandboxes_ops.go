package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/previewgate/previewgate/config"
)

// sandboxes up, stop, rm and logs: one call each, logs -f a stream.

func sbxUp(c *sandboxesCmd) error {
	if err := c.connect(1); err != nil {
		return err
	}
	id := c.args[0]
	var body any
	if c.template != "" || len(c.metadata) > 0 || len(c.env) > 0 {
		body = map[string]any{"template": c.template, "metadata": map[string]string(c.metadata), "env": map[string]string(c.env)}
	}
	b, err := c.get("PUT", sandboxPath(id, ""), body, serverBounded)
	if err != nil || c.json {
		return writeOr(c, b, err)
	}
	var r struct {
		Template string  `json:"template"`
		State    string  `json:"state"`
		Took     float64 `json:"took_seconds"`
		URL      string  `json:"url"`
		Created  *bool   `json:"created"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return failed(codeBadAnswer, fmt.Errorf("sandboxes up: unexpected answer: %w", err))
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

func sbxStop(c *sandboxesCmd) error { return c.op("POST", "/stop", "stopped", callTimeout) }

func sbxRemove(c *sandboxesCmd) error { return c.op("DELETE", "", "removed", callTimeout) }

// op is stop, rm, pause and resume: one call, then "sandbox ID done".
func (c *sandboxesCmd) op(method, more, done string, timeout time.Duration) error {
	if err := c.connect(1); err != nil {
		return err
	}
	b, err := c.get(method, sandboxPath(c.args[0], more), nil, timeout)
	if err != nil || c.json {
		return writeOr(c, b, err)
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
		if err != nil || c.json {
			return writeOr(c, b, err)
		}
		var r struct {
			Lines []string `json:"lines"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return failed(codeBadAnswer, fmt.Errorf("sandboxes logs: unexpected answer: %w", err))
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
// string per event, "event: end" when the container's output ended,
// "event: error" when following failed); with --json each event's JSON
// string, one a line.
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
				fmt.Fprintln(c.stderr, c.ended())
			}
			return nil
		case "error":
			var msg string
			if json.Unmarshal([]byte(data), &msg) != nil {
				msg = data
			}
			return failed(codeFollowFailed, fmt.Errorf("sandboxes logs: following stopped: %s", msg))
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
				return failed(codeBadAnswer, fmt.Errorf("sandboxes logs: unexpected event %.100q", data))
			}
			fmt.Fprintln(c.stdout, l)
		}
		event, data = "", ""
	}
	if err := sc.Err(); err != nil {
		return failed(codeStreamBroken, fmt.Errorf("sandboxes logs: the stream broke: %w", err))
	}
	return failed(codeStreamBroken, errors.New("sandboxes logs: the gateway ended the stream before the container stopped"))
}

// ended says what became of the sandbox whose followed output ended. The
// stream's end event says only that it ended: the admin API sends it when
// the runtime's log stream closes, for a stop and a removal alike. The
// sandbox's own call (GET /admin/sandboxes/{id}) then says which: a
// sandbox it no longer has was removed (on Kubernetes a stop without a
// workspace deletes all there was). The stream closes when the app exits,
// a moment before the runtime marks the container exited or removes it:
// while it is still running (or removing), ended asks again, for up to
// settleWait.
func (c *sandboxesCmd) ended() string {
	id := c.args[0]
	deadline := time.Now().Add(settleWait)
	for {
		r, err := c.listed(id)
		switch {
		case err != nil:
			return fmt.Sprintf("sandbox %s: its output ended (it stopped or was removed; asking which failed: %v)", id, err)
		case r == nil:
			return fmt.Sprintf("sandbox %s removed", id)
		case (r.State != "running" && r.State != "removing") || time.Now().After(deadline):
			return fmt.Sprintf("sandbox %s stopped (now %s)", id, r.state())
		}
		time.Sleep(settlePoll)
	}
}

// settleWait bounds how long ended waits for the runtime to catch up with
// an ended output; settlePoll is how often it asks meanwhile.
const (
	settleWait = 10 * time.Second
	settlePoll = 200 * time.Millisecond
)

// listed returns id's row as the API has it, nil if it has no such
// sandbox (404).
func (c *sandboxesCmd) listed(id string) (*sandboxRow, error) {
	b, err := c.get("GET", sandboxPath(id, ""), nil, callTimeout)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var row sandboxRow
	if err := json.Unmarshal(b, &row); err != nil {
		return nil, fmt.Errorf("the answer is not a sandbox: %w", err)
	}
	return &row, nil
}
