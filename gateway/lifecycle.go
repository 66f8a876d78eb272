package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr"
)

// ensureOptions is the wake policy and create quota for d's request r
// (#7): a browser navigation or a non-browser client may wake a stopped
// sandbox; a browser's background fetch or WebSocket (an HMR client
// retrying all night) may not, and gets ErrAsleep (503, Retry-After)
// unless a wake is already in progress. A request without a token never
// creates (policy.go).
func (g *Gateway) ensureOptions(r *http.Request, d *decision) sandboxmgr.Options {
	t, sub := d.t, d.sub
	opts := sandboxmgr.Options{NoWake: !mayWake(r)}
	if n := t.cfg.Limits.CreatesPerSubjectPerHour; n > 0 && sub != "" {
		opts.OnCreate = func() error {
			if retry, ok := g.creates.Take(sub, n, t.cfg.Limits.LimiterEntries); !ok {
				return &quotaError{limit: n, retry: retry}
			}
			return nil
		}
	}
	opts.Subject, opts.SubjectMaxRunning = sub, t.cfg.Limits.MaxRunningPerSubject
	if d.by != withToken {
		opts = g.anonymousOptions(opts, d)
	}
	return opts
}

// mayWake reports whether r may wake a sleeping sandbox (ensureOptions): a
// navigation, or a client that sends no Sec-Fetch-* headers at all (curl,
// API clients, old browsers).
func mayWake(r *http.Request) bool {
	mode := headerValue(r.Header, "Sec-Fetch-Mode")
	if mode == "" && headerValue(r.Header, "Sec-Fetch-Site") == "" && headerValue(r.Header, "Sec-Fetch-Dest") == "" {
		return true // not a fetch-metadata browser
	}
	return mode == "navigate" && !isUpgrade(r)
}

// quotaError: the subject created too many sandboxes in the last hour; it
// carries when the subject may create again.
type quotaError struct {
	limit int
	retry time.Duration
}

func (e *quotaError) Error() string {
	return fmt.Sprintf("%d creates in the last hour; next in %s", e.limit, e.retry.Round(time.Second))
}

// lifecycleError maps the lifecycle's own failures (ErrAsleep, the create
// quota) to statuses; nil for anything else. ensureError tries it first.
func lifecycleError(err error) *httpError {
	var q *quotaError
	var sl *sandboxmgr.SubjectLimitError
	switch {
	case errors.As(err, &sl):
		return &httpError{Status: http.StatusTooManyRequests, Code: "subject_running_limit", RetryAfter: 30,
			Msg: fmt.Sprintf("You already have %d previews running, the most one user may run at once. "+
				"Close one you no longer need (idle previews stop by themselves), then reload this page.", sl.Limit), Err: err}
	case errors.As(err, &q):
		return &httpError{Status: http.StatusTooManyRequests, Code: "create_quota",
			RetryAfter: max(1, int(q.retry.Round(time.Second)/time.Second)),
			Msg:        "Too many new previews were created with this access in the last hour. Try again later.", Err: err}
	case errors.Is(err, sandboxmgr.ErrAsleep):
		return &httpError{Status: http.StatusServiceUnavailable, Code: "asleep", RetryAfter: 5,
			Msg: "The preview is asleep. Reload the page to wake it.", Err: err}
	}
	return nil
}
