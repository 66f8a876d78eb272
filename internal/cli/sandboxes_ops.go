package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
)

// sandboxes up, stop, rm, pause, resume, requests and logs: one call
// each, logs -f a stream.

func sbxUp(c *sandboxesCmd) error {
	id := c.args[0]
	req := adminapi.PutRequest{Template: c.template, Metadata: c.metadata, Env: c.env}
	given := c.template != "" || len(c.metadata) > 0 || len(c.env) > 0
	call := func(ctx context.Context) (adminapi.PutResult, error) { return c.api.PutSandbox(ctx, id, req) }
	return answer(c, serverBounded, call, func(r adminapi.PutResult) error {
		fmt.Fprintf(c.stdout, "sandbox %s %s (template %s, took %s)\n", id, dash(r.State), dash(r.Template),
			time.Duration(r.TookSeconds*float64(time.Second)).Round(time.Millisecond))
		if given && !r.Created {
			fmt.Fprintf(c.stderr, "note: sandbox %s already existed (or another call was creating it): it keeps its own template, env and metadata; --template, --env and --metadata apply to a sandbox up creates\n", id)
		}
		if c.cfg != nil && len(c.cfg.Domains) > 0 {
			// The host only: which scheme and port reach the gateway from
			// here the config cannot say (a load balancer, a port mapping).
			fmt.Fprintln(c.stdout, config.SandboxPrefix+id+"."+c.cfg.Domains[0])
		}
		return nil
	})
}

var (
	sbxStop   = op("stopped", callTimeout, (*adminapi.Client).StopSandbox)
	sbxRemove = op("removed", callTimeout, (*adminapi.Client).RemoveSandbox)
	sbxPause  = op("paused", callTimeout, (*adminapi.Client).PauseSandbox)
	sbxResume = op("running", serverBounded, (*adminapi.Client).ResumeSandbox) // waits as long as the API does
)

// op is stop, rm, pause and resume: one call, then "sandbox ID done".
func op[T any](done string, timeout time.Duration, do func(*adminapi.Client, context.Context, string) (T, error)) func(*sandboxesCmd) error {
	return func(c *sandboxesCmd) error {
		call := func(ctx context.Context) (T, error) { return do(c.api, ctx, c.args[0]) }
		return answer(c, timeout, call, func(T) error {
			_, err := fmt.Fprintf(c.stdout, "sandbox %s %s\n", c.args[0], done)
			return err
		})
	}
}

// sbxRequests prints a sandbox's last requests through the replica that
// answers, newest first.
func sbxRequests(c *sandboxesCmd) error {
	call := func(ctx context.Context) (adminapi.RequestLog, error) { return c.api.Requests(ctx, c.args[0], c.n) }
	return answer(c, callTimeout, call, func(r adminapi.RequestLog) error {
		if r.Counters != nil {
			fmt.Fprintf(c.stdout, "replica %s: %d requests, %d bytes in, %d bytes out\n", dash(r.Replica), r.Counters.Requests, r.Counters.BytesIn, r.Counters.BytesOut)
		}
		if len(r.Requests) == 0 {
			fmt.Fprintf(c.stdout, "no requests through replica %s\n", dash(r.Replica))
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tMETHOD\tPATH\tSTATUS\tMS\tIN\tOUT\tCLIENT")
		for _, q := range r.Requests {
			path := strconv.Quote(q.Path)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%d\t%d\t%s\n", q.Time.Local().Format("15:04:05.000"), q.Method, path[1:len(path)-1],
				q.Status, q.Millis, q.BytesIn, q.BytesOut, dash(q.Client))
		}
		return tw.Flush()
	})
}

func sbxLogs(c *sandboxesCmd) error {
	if c.tail < 0 {
		return usageError("sandboxes logs: --tail must be 0 or more")
	}
	id := c.args[0]
	if c.follow {
		return c.followLogs(id)
	}
	call := func(ctx context.Context) (adminapi.Logs, error) { return c.api.Logs(ctx, id, c.tail) }
	return answer(c, callTimeout, call, func(r adminapi.Logs) error {
		for _, l := range r.Lines {
			fmt.Fprintln(c.stdout, l)
		}
		return nil
	})
}

// followLogs prints id's lines as they come (with --json each as its
// JSON string, one a line) until its output ends, then says whether it
// stopped or was removed.
func (c *sandboxesCmd) followLogs(id string) error {
	err := c.api.FollowLogs(context.Background(), id, c.tail, func(line string) error {
		if c.json {
			b, _ := json.Marshal(line)
			line = string(b)
		}
		_, err := fmt.Fprintln(c.stdout, line)
		return err
	})
	switch {
	case err == nil:
		if !c.json {
			fmt.Fprintln(c.stderr, c.ended())
		}
		return nil
	case errors.Is(err, adminapi.ErrFollowFailed):
		return failed(codeFollowFailed, fmt.Errorf("sandboxes logs: %w", err))
	case errors.Is(err, adminapi.ErrStreamBroken):
		return failed(codeStreamBroken, fmt.Errorf("sandboxes logs: %w", err))
	}
	return c.explain(err)
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
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		s, err := c.api.GetSandbox(ctx, id)
		cancel()
		err = c.explain(err)
		var ae *adminapi.Error
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
			return fmt.Sprintf("sandbox %s removed", id)
		case err != nil:
			return fmt.Sprintf("sandbox %s: its output ended (it stopped or was removed; asking which failed: %v)", id, err)
		case (s.State != "running" && s.State != "removing") || time.Now().After(deadline):
			return fmt.Sprintf("sandbox %s stopped (now %s)", id, state(s))
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
