package gateway

import (
	"bytes"
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
	if mode := headerValue(r.Header, "Sec-Fetch-Mode"); mode != "" {
		return mode == "navigate"
	}
	return strings.Contains(headerValue(r.Header, "Accept"), "text/html")
}

// isStatusRequest reports a request for the gateway's status stream.
func isStatusRequest(r *http.Request) bool {
	return r.URL.Path == statusPath || strings.HasPrefix(r.URL.Path, statusPath+"/")
}

// waitingPage serves the status stream, or the waiting page for a
// navigation to a cold sandbox, and reports whether it answered.
func (g *Gateway) waitingPage(w http.ResponseWriter, r *http.Request, tpl *config.Template, id string, opts func() sandboxmgr.Options) bool {
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
	g.sb.Wake(id, tpl, opts())
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, waitingHTML)
	return true
}

// statusEvent is one SSE message of the status stream. Logs are the
// sandbox's output: sanitized and bounded (pageLogs); the stream is JSON on
// one data line, so no byte of them can end an event or start another.
type statusEvent struct {
	Phase     string   `json:"phase"`
	Msg       string   `json:"message,omitempty"`
	Reason    string   `json:"reason,omitempty"` // failed: a sandboxmgr.Reason* constant
	Logs      []string `json:"logs,omitempty"`
	ElapsedMS int64    `json:"elapsed_ms,omitempty"` // since the wake began
	TypicalMS int64    `json:"typical_ms,omitempty"` // a recent wake of this template; 0: unknown
}

// serveStatus streams the wake's phases and the app's output until ready,
// failed, the client leaves, or the template's ready timeout (plus the
// start queue) passes. An event is sent when something other than the
// elapsed time changed; the page counts time itself between events.
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
	var last []byte
	for {
		ev := g.statusOf(r, id)
		elapsed := ev.ElapsedMS
		ev.ElapsedMS = 0
		key, _ := json.Marshal(ev)
		if !bytes.Equal(key, last) {
			ev.ElapsedMS = elapsed
			if !send(ev) {
				return
			}
			last = key
		}
		if ev.Phase == sandboxmgr.PhaseReady || ev.Phase == sandboxmgr.PhaseFailed {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-limit.C:
			send(statusEvent{Phase: sandboxmgr.PhaseFailed, Reason: sandboxmgr.ReasonReadyTimeout,
				Msg: "The sandbox did not become ready in time."})
			return
		case <-tick.C:
		}
	}
}

// statusOf is the status event for id's wake now.
func (g *Gateway) statusOf(r *http.Request, id string) statusEvent {
	p := g.sb.Progress(id)
	ev := statusEvent{Phase: p.Phase, Msg: p.Msg, Logs: pageLogs(p.Logs),
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

// waitingHTML shows the wake's progress and the app's output as it
// starts, the reason and output when it fails, and reloads when ready.
// Text from the stream is set with textContent only (no markup from it).
const waitingHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Starting preview…</title>
<style>` + pageStyle + `
ol{list-style:none;padding:0;margin:1.2em 0 .4em;display:flex;gap:.4em;flex-wrap:wrap}
ol li{flex:1;min-width:6.5em;font-size:.85em;color:var(--mute);border-top:3px solid var(--line);padding-top:.35em}
ol li.done{border-color:var(--ok);color:var(--fg)}ol li.now{border-color:var(--acc);color:var(--fg);font-weight:600}
.bar{height:6px;background:var(--line);border-radius:3px;overflow:hidden;margin:1em 0 .3em}
.bar div{height:100%;width:0;background:var(--acc);border-radius:3px;transition:width .3s}
#retry,.failed ol,.failed #time,.failed .bar{display:none}.failed #retry{display:inline-block}
pre:empty{display:none}
</style></head>
<body><main id="main"><h1 id="title">Starting the preview…</h1><p id="msg" class="mute">Waking the sandbox.</p>
<div class="bar"><div id="fill"></div></div><p id="time" class="mute"></p>
<ol id="phases"><li data-p="queued">Queued<span></span></li><li data-p="creating">Creating<span></span></li>
<li data-p="starting">Starting<span></span></li><li data-p="waiting for port">Waiting for the app<span></span></li><li data-p="ready">Ready</li></ol>
<pre id="logs"></pre><p><button id="retry" onclick="location.reload()">Retry</button></p>
<p class="mute">previewgate</p></main>
<script>
(function () {
  var order = ["queued", "creating", "starting", "waiting for port", "ready"];
  var $ = function (id) { return document.getElementById(id); };
  var es = new EventSource("/__previewgate/status");
  var done = false, base = 0, at = Date.now(), typical = 0, timer, seen = {};
  function tick() {
    var s = (base + Date.now() - at) / 1000, t = typical / 1000;
    $("time").textContent = s.toFixed(1) + " s" + (t ? " · usually about " + t.toFixed(1) + " s" : "");
    $("fill").style.width = (t ? Math.min(95, 100 * s / t) : Math.min(90, 100 * (1 - Math.exp(-s / 15)))) + "%";
  }
  timer = setInterval(tick, 200);
  es.onmessage = function (e) {
    var ev = JSON.parse(e.data);
    if (ev.elapsed_ms) { base = ev.elapsed_ms; at = Date.now(); }
    typical = ev.typical_ms || 0;
    var logs = $("logs"), end = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
    logs.textContent = (ev.logs || []).join("\n");
    if (end) logs.scrollTop = logs.scrollHeight;
    if (ev.phase === "failed") {
      done = true; es.close(); clearInterval(timer);
      document.title = "Preview failed to start";
      $("main").className = "failed";
      $("title").textContent = "The preview could not be started";
      $("title").className = "bad";
      $("msg").textContent = ev.message || "";
      $("fill").style.width = "100%";
      return;
    }
    var i = order.indexOf(ev.phase), now = base + Date.now() - at;
    if (i >= 0 && seen[i] === undefined) seen[i] = now;
    document.querySelectorAll("#phases li").forEach(function (li) {
      var j = order.indexOf(li.getAttribute("data-p"));
      li.className = j < i ? "done" : (j === i ? "now" : "");
      // How long each phase took, as the phases of the requests'
      // Server-Timing (#22): from its first sight to the next phase's.
      var next;
      for (var k = j + 1; k <= i; k++) { if (seen[k] !== undefined) { next = seen[k]; break; } }
      if (j < i && seen[j] !== undefined && next !== undefined && j < 4) {
        li.querySelector("span").textContent = " · " + ((next - seen[j]) / 1000).toFixed(1) + " s";
      }
    });
    $("msg").textContent = ev.message || "Waking the sandbox.";
    tick();
    if (ev.phase === "ready") { done = true; es.close(); $("fill").style.width = "100%"; location.reload(); }
  };
  es.onerror = function () {
    if (done) return;
    es.close();
    setTimeout(function () { location.reload(); }, 2000); // the stream broke: try again
  };
})();
</script></body></html>
`
