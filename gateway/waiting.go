package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/pages"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// The waiting page (#7, template cold_start: waiting-page). A browser
// navigation to a sandbox that is not known ready gets, at once, a small
// page while the wake runs in the background. The page follows the wake's
// phases over SSE on pages.StatusPath (authenticated like any request: it rides
// the same cookie) and reloads itself when the sandbox is ready. Everything
// else (XHR, assets, WebSocket, API clients) keeps blocking until ready.

// isNavigation reports a browser loading a document: Sec-Fetch-Mode
// navigate, or (browsers without fetch metadata) a GET accepting HTML.
func isNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet || isUpgrade(r) {
		return false
	}
	if mode := headerValue(r.Header, "Sec-Fetch-Mode"); mode != "" {
		return mode == "navigate"
	}
	return strings.Contains(headerValue(r.Header, "Accept"), "text/html")
}

// waitingPage serves the status stream, or the waiting page for a
// navigation to d's sandbox when it is cold, and reports whether it
// answered.
func (g *Gateway) waitingPage(w http.ResponseWriter, r *http.Request, d *decision) bool {
	tpl := d.tpl
	if isStatusRequest(r) {
		g.serveStatus(w, r, d.h, tpl, g.holdsToken(r, d))
		return true
	}
	if tpl.ColdStart != config.ColdStartWaitingPage || d.ready || !isNavigation(r) {
		return false
	}
	d.h.Wake(tpl, g.ensureOptions(r, d))
	pages.Waiting(w)
	return true
}

// serveStatus streams the wake's phases, and the app's output if output,
// until ready, failed, the client leaves, or the template's ready timeout
// (plus the start queue) passes.
func (g *Gateway) serveStatus(w http.ResponseWriter, r *http.Request, h sandboxmgr.Handle, tpl *config.Template, output bool) {
	pages.Stream(w, r, tpl.Ready.Timeout.D()+30*time.Second, func() pages.Event {
		ev := statusOf(r, h)
		if !output {
			ev.Logs = nil
		}
		return ev
	})
}

// statusOf is the status event for h's wake now.
func statusOf(r *http.Request, h sandboxmgr.Handle) pages.Event {
	p := h.Snapshot().Progress
	ev := pages.Event{Phase: p.Phase, Msg: p.Msg, Logs: pages.Logs(p.Logs),
		ElapsedMS: p.Elapsed.Milliseconds(), TypicalMS: p.Typical.Milliseconds()}
	switch p.Phase {
	case "":
		ev.Phase = sandboxmgr.PhaseQueued
	case sandboxmgr.PhaseFailed:
		// The page shows what the error page would say, never the
		// internal error.
		ev.Msg = "The sandbox could not be started."
		if he := lifecycleError(p.Err); he != nil {
			ev.Msg = he.Msg
		} else if p.Err != nil {
			he := ensureError(r.Context(), p.Err)
			ev.Msg, ev.Reason = he.Msg, he.Reason
			if he.Logs != nil {
				ev.Logs = he.Logs
			}
		}
	}
	return ev
}
