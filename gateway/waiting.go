package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// The waiting page (#7, template cold_start: waiting-page). A browser
// navigation to a sandbox that is not known ready gets, at once, a small
// page while the wake runs in the background. The page follows the wake's
// phases over SSE on statusPath (authenticated like any request: it rides
// the same cookie) and reloads itself when the sandbox is ready. Everything
// else (XHR, assets, WebSocket, API clients) keeps blocking until ready.

// statusPath is reserved on every preview host: the app never sees it.
const statusPath = "/__previewgate/status"

// statusPoll is how often the status stream looks at the wake's progress.
const statusPoll = 100 * time.Millisecond

// isNavigation reports a browser loading a document: Sec-Fetch-Mode
// navigate, or (browsers without fetch metadata) a GET accepting HTML.
func isNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet || isUpgrade(r) {
		return false
	}
	if mode := r.Header.Get("Sec-Fetch-Mode"); mode != "" {
		return mode == "navigate"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// isStatusRequest reports a request for the gateway's status stream.
func isStatusRequest(r *http.Request) bool {
	return r.URL.Path == statusPath || strings.HasPrefix(r.URL.Path, statusPath+"/")
}

// waitingPage serves the status stream, or the waiting page for a
// navigation to a cold sandbox, and reports whether it answered.
func (g *Gateway) waitingPage(w http.ResponseWriter, r *http.Request, t *table, id string, tpl *config.Template, sub func() string) bool {
	if isStatusRequest(r) {
		g.serveStatus(w, r, id, tpl)
		return true
	}
	if tpl.ColdStart != config.ColdStartWaitingPage || !isNavigation(r) {
		return false
	}
	if _, ok := g.sb.Cached(id); ok {
		return false
	}
	g.sb.Wake(id, tpl, g.ensureOptions(r, t, sub()))
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, waitingHTML)
	return true
}

// statusEvent is one SSE message of the status stream.
type statusEvent struct {
	Phase string `json:"phase"`
	Msg   string `json:"message,omitempty"`
}

// serveStatus streams the wake's phases until ready, failed, the client
// leaves, or the template's ready timeout (plus the start queue) passes.
func (g *Gateway) serveStatus(w http.ResponseWriter, r *http.Request, id string, tpl *config.Template) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(ev statusEvent) bool {
		b, _ := json.Marshal(ev)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	limit := time.NewTimer(tpl.Ready.Timeout.D() + 30*time.Second)
	defer limit.Stop()
	tick := time.NewTicker(statusPoll)
	defer tick.Stop()
	last := statusEvent{Phase: "-"}
	for {
		p := g.sb.Progress(id)
		ev := statusEvent{Phase: p.Phase, Msg: p.Msg}
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
				ev.Msg = ensureError(r.Context(), p.Err).Msg
			}
		}
		if ev != last {
			if !send(ev) {
				return
			}
			last = ev
		}
		if ev.Phase == sandboxmgr.PhaseReady || ev.Phase == sandboxmgr.PhaseFailed {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-limit.C:
			send(statusEvent{Phase: sandboxmgr.PhaseFailed, Msg: "The sandbox did not become ready in time."})
			return
		case <-tick.C:
		}
	}
}

// waitingHTML shows the wake's progress and reloads when ready. Messages
// are set with textContent (no markup from the stream).
const waitingHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Starting preview…</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:15vh auto;padding:0 1em;color:#222}
h1{font-size:1.3em}ol{padding-left:1.2em;color:#999}li.done{color:#222}li.now{color:#222;font-weight:600}
#err{color:#b00}</style></head>
<body><h1 id="title">Starting the preview…</h1>
<ol id="phases"><li data-p="queued">Queued</li><li data-p="creating">Creating the sandbox</li>
<li data-p="starting">Starting</li><li data-p="waiting for port">Waiting for the app</li><li data-p="ready">Ready</li></ol>
<p id="msg"></p><p id="err"></p>
<script>
(function () {
  var order = ["queued", "creating", "starting", "waiting for port", "ready"];
  var es = new EventSource("/__previewgate/status");
  var done = false;
  es.onmessage = function (e) {
    var ev = JSON.parse(e.data);
    if (ev.phase === "failed") {
      done = true; es.close();
      document.getElementById("title").textContent = "The preview could not be started";
      document.getElementById("err").textContent = ev.message || "";
      return;
    }
    var at = order.indexOf(ev.phase);
    document.querySelectorAll("#phases li").forEach(function (li) {
      var i = order.indexOf(li.getAttribute("data-p"));
      li.className = i < at ? "done" : (i === at ? "now" : "");
    });
    document.getElementById("msg").textContent = ev.message || "";
    if (ev.phase === "ready") { done = true; es.close(); location.reload(); }
  };
  es.onerror = function () {
    if (done) return;
    es.close();
    setTimeout(function () { location.reload(); }, 2000); // the stream broke: try again
  };
})();
</script></body></html>
`
