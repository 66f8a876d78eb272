package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/internal/meter"
	"github.com/previewgate/previewgate/internal/pages"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// httpError is a handler failure. The client sees Msg (and Code); Err goes
// to the log only.
type httpError struct {
	Status     int
	Code       string // machine-readable, e.g. "bad_host"
	Msg        string // safe to show
	Err        error  // internal detail for the log; may be nil
	RetryAfter int    // seconds; 0 means no Retry-After header
	// Reload: a browser's page tries again by itself (pages.Failure).
	Reload bool
	// A failed start (#16): why (a sandboxmgr.Reason* constant), the app's
	// exit code and its last output. The output is the sandbox's, hostile:
	// sanitized by the manager, bounded and escaped by internal/pages.
	Reason   string
	ExitCode *int
	Logs     []string
	// Sandbox is the sandbox the request was for, when the failure is
	// the client's own and happened on the way to it: the log names it.
	Sandbox string
}

func (e *httpError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Code, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Code)
}

func (e *httpError) Unwrap() error { return e.Err }

// statusClientClosed is logged when the client went away before we answered.
const statusClientClosed = meter.StatusClientClosed

// startFailure maps an explained failed start (*sandboxmgr.StartError) to
// one status per kind of failure, with a message that says which, and the
// app's last output: 504 only for an app that ran but never became ready
// (the ready timeout, as the README's table says); 502 sandbox_exited for
// an app that exited or crash-loops (it answered 504 not_ready, #24, 6); 502
// sandbox_failed for a missing image. nil for any other error.
func startFailure(err error) *httpError {
	var se *sandboxmgr.StartError
	if !errors.As(err, &se) {
		return nil
	}
	e := &httpError{Status: http.StatusBadGateway, Code: se.Code(), Reason: se.Reason, Err: err,
		Logs: pages.Logs(se.Logs)}
	switch se.Reason {
	case sandboxmgr.ReasonExited:
		e.Msg = fmt.Sprintf("The app exited while starting (exit code %d).", se.ExitCode)
		if se.OOMKilled {
			e.Msg = fmt.Sprintf("The app ran out of memory while starting: it was killed at the template's memory limit (exit code %d).", se.ExitCode)
		}
		e.ExitCode = &se.ExitCode
	case sandboxmgr.ReasonCrashLoop:
		e.Msg = fmt.Sprintf("The app exits right after it starts (exit code %d), every time.", se.ExitCode)
		if se.OOMKilled {
			e.Msg = fmt.Sprintf("The app runs out of memory right after it starts, every time: it is killed at the template's memory limit (exit code %d).", se.ExitCode)
		}
		e.ExitCode = &se.ExitCode
	case sandboxmgr.ReasonReadyTimeout:
		e.Status = http.StatusGatewayTimeout
		e.Msg = "The app did not answer in time; it was stopped."
	case sandboxmgr.ReasonImageMissing:
		e.Msg = "The sandbox image is missing on the preview host: an operator has to build or pull it."
	default:
		e.Msg = "The sandbox could not be started."
	}
	return e
}

// fail logs e and answers the client.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, e *httpError) {
	if e.Status == statusClientClosed {
		g.log.DebugContext(r.Context(), "client went away", "host", r.Host, "err", e.Err)
		return
	}
	lvl := slog.LevelDebug
	if e.Status >= 500 {
		lvl = slog.LevelWarn
	}
	if e.Sandbox != "" {
		g.log.Log(r.Context(), lvl, "request failed", "host", r.Host, "sandbox", e.Sandbox, "path", r.URL.Path,
			"status", e.Status, "code", e.Code, "err", e.Err)
	} else {
		g.log.Log(r.Context(), lvl, "request failed", "host", r.Host, "path", r.URL.Path,
			"status", e.Status, "code", e.Code, "err", e.Err)
	}
	pages.Error(w, r, pages.Failure{Status: e.Status, Code: e.Code, Msg: e.Msg, RetryAfter: e.RetryAfter,
		Reload: e.Reload, Reason: e.Reason, ExitCode: e.ExitCode, Logs: e.Logs})
}

func authError(err error) *httpError {
	status := auth.Status(err)
	msg := "This preview needs an access token (" + auth.Reason(err) + "). Open it again from the app that created it."
	code := "unauthorized"
	if status == http.StatusForbidden {
		msg, code = "Access denied: "+auth.Reason(err)+".", "forbidden"
	}
	return &httpError{Status: status, Code: code, Msg: msg, Err: err}
}

// ensureError maps sandbox manager failures to honest statuses.
func ensureError(ctx context.Context, err error) *httpError {
	if he := lifecycleError(err); he != nil {
		return he
	}
	if he := startFailure(err); he != nil && ctx.Err() == nil {
		return he
	}
	switch {
	case ctx.Err() != nil:
		return &httpError{Status: statusClientClosed, Code: "client_closed", Err: err}
	case errors.Is(err, sandboxmgr.ErrNotReady):
		return &httpError{Status: http.StatusGatewayTimeout, Code: "not_ready",
			Msg: "The sandbox did not become ready in time.", Err: err}
	case errors.Is(err, sandboxmgr.ErrCapacity):
		return &httpError{Status: http.StatusServiceUnavailable, Code: "busy", RetryAfter: 10,
			Msg: "The preview service is busy. Try again in a moment.", Err: err}
	case errors.Is(err, runtime.ErrUnavailable):
		return &httpError{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: 5,
			Msg: "The preview service cannot reach its sandbox runtime right now.", Err: err}
	case errors.Is(err, runtime.ErrForeign):
		// Another gateway's (or someone's) container holds the name: never
		// touched, and not this gateway's to fix.
		return &httpError{Status: http.StatusConflict, Code: "foreign_container", Msg: foreignMsg(err), Err: err}
	}
	return &httpError{Status: http.StatusBadGateway, Code: "sandbox_failed",
		Msg: "The sandbox could not be started.", Err: err}
}

// foreignMsg tells whoever opened the preview whose container holds its
// name and what the operator can do (#21).
func foreignMsg(err error) string {
	var fe *sandboxmgr.ForeignError
	switch {
	case errors.As(err, &fe) && fe.Scope != "":
		return fmt.Sprintf("A container with this preview's name belongs to the gateway scope %q, not to this gateway. "+
			"Open it through that gateway (or give this one scope: %s), or remove %s if nobody needs it.",
			fe.Scope, fe.Scope, fe.Removable())
	case errors.As(err, &fe) && fe.Managed:
		return "A container with this preview's name belongs to another gateway's scope (other labels). " +
			"Open it through that gateway, or remove " + fe.Removable() + " if nobody needs it."
	}
	return "A container with this preview's name exists but was not made by previewgate. Remove or rename it to use this preview."
}
