// Package pages renders what previewgate itself answers on a preview host in
// place of the app: the error answer (an HTML page for a browser, JSON for
// any other client), the waiting page of a cold start and the status stream
// (server-sent events) that page follows. It decides no status, message or
// policy: the gateway hands it a Failure, or a source of Events.
//
// Its promises, each tested in pages_test.go:
//
//  1. Text that comes from a sandbox (the app's output: Failure.Logs,
//     Event.Logs) is hostile. Logs cuts it to the last LogLines lines of at
//     most LogRunes runes each, sanitized again (sandboxmgr.SanitizeLine: no
//     control bytes, no terminal escapes); it is escaped where it is shown:
//     by html/template on the error page, by the JSON encoder in JSON and on
//     the stream, and the waiting page's script sets it with textContent only.
//  2. The pages are self-contained (embedded files): no asset, style or
//     script from anywhere else, and no script but the waiting page's own
//     and an error page's that reloads it (Failure.Reload: a bounded
//     number of times, text set with textContent only).
//  3. An error answer is HTML when the client's Accept names text/html, JSON
//     ({"error", "code", ...}) otherwise; every answer is sent with
//     Cache-Control: no-store and X-Content-Type-Options: nosniff.
//  4. Every status event is one data line of JSON: no byte of the logs can
//     end an event or start another.
package pages

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr"
)

// StatusPath is the status stream's path, reserved on every preview host:
// the app never sees it. The waiting page's script asks for it.
const StatusPath = "/__previewgate/status"

// Poll is how often Stream looks at the wake's progress.
const Poll = 100 * time.Millisecond

// Bounds on the app's output a page, a JSON error or an event shows (the
// manager already keeps no more; this holds whatever hands it over).
const (
	LogLines = sandboxmgr.LogTailLines
	LogRunes = sandboxmgr.LogLineMax
)

//go:embed error.html waiting.html style.css
var files embed.FS

var (
	errorPage = template.Must(template.ParseFS(files, "error.html", "style.css"))
	// waitingPage is static: rendered once.
	waitingPage = render(template.Must(template.ParseFS(files, "waiting.html", "style.css")))
)

func render(t *template.Template) []byte {
	var b bytes.Buffer
	if err := t.Execute(&b, nil); err != nil {
		panic(err) // the embedded template takes no data: cannot fail on input
	}
	return b.Bytes()
}

// Failure is an error answer as the client sees it.
type Failure struct {
	Status     int
	Code       string // machine-readable, e.g. "bad_host"
	Msg        string // safe to show
	RetryAfter int    // seconds; 0 means no Retry-After header
	// Reload: the HTML page reloads itself every RetryAfter seconds (at
	// least one), ReloadTries times at most, then says it gave up.
	Reload bool
	// A failed start: why (a sandboxmgr.Reason* constant), the app's exit
	// code and its last output (hostile: bounded by Logs).
	Reason   string
	ExitCode *int
	Logs     []string
}

// Logs returns the last LogLines of lines, each sanitized again and cut to
// LogRunes.
func Logs(lines []string) []string {
	if len(lines) == 0 {
		return nil
	}
	lines = lines[max(0, len(lines)-LogLines):]
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = sandboxmgr.SanitizeLine(l, LogRunes)
	}
	return out
}

// wantsHTML reports whether the client is a browser that prefers a page.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// own sets the headers every answer of this package carries.
func own(h http.Header, contentType string) {
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// Error answers f with an HTML page for browsers, JSON otherwise.
func Error(w http.ResponseWriter, r *http.Request, f Failure) {
	h := w.Header()
	if f.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	if wantsHTML(r) {
		own(h, "text/html; charset=utf-8")
		w.WriteHeader(f.Status)
		heading := http.StatusText(f.Status)
		if f.Reason != "" {
			heading = "The preview could not be started"
		}
		_ = errorPage.Execute(w, struct {
			Status         int
			Text, Heading  string
			Msg, Code      string
			Logs           []string
			Retry, Failure bool
			Reload, Tries  int // ms between reloads (0: none), and how many
		}{f.Status, http.StatusText(f.Status), heading, f.Msg, f.Code, f.Logs,
			f.Reason != "" || f.RetryAfter > 0 || f.Status >= 500, f.Reason != "",
			reloadMS(f), ReloadTries})
		return
	}
	own(h, "application/json")
	w.WriteHeader(f.Status)
	json.NewEncoder(w).Encode(struct {
		Error    string   `json:"error"`
		Code     string   `json:"code"`
		Reason   string   `json:"reason,omitempty"`
		ExitCode *int     `json:"exit_code,omitempty"`
		Logs     []string `json:"logs,omitempty"`
	}{f.Msg, f.Code, f.Reason, f.ExitCode, f.Logs})
}

// ReloadTries bounds how often an error page with Failure.Reload reloads
// itself in a row.
const ReloadTries = 10

func reloadMS(f Failure) int {
	if !f.Reload {
		return 0
	}
	return 1000 * max(1, f.RetryAfter)
}

// Waiting answers the waiting page: the wake's progress and the app's
// output as it starts, the reason and output when it fails; it reloads
// itself when the sandbox is ready.
func Waiting(w http.ResponseWriter) {
	own(w.Header(), "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(waitingPage)
}

// Event is one message of the status stream.
type Event struct {
	Phase     string   `json:"phase"` // a sandboxmgr.Phase* constant
	Msg       string   `json:"message,omitempty"`
	Reason    string   `json:"reason,omitempty"`     // failed: a sandboxmgr.Reason* constant
	Logs      []string `json:"logs,omitempty"`       // bounded by Logs
	ElapsedMS int64    `json:"elapsed_ms,omitempty"` // since the wake began
	TypicalMS int64    `json:"typical_ms,omitempty"` // a recent wake of this template; 0: unknown
}

// Stream serves the status stream: the event next returns, every Poll,
// until one is ready or failed, the client leaves, or limit passes (then a
// failed event saying so). An event is sent when something other than the
// elapsed time changed; the page counts time itself between events.
func Stream(w http.ResponseWriter, r *http.Request, limit time.Duration, next func() Event) {
	own(w.Header(), "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(ev Event) bool {
		b, _ := json.Marshal(ev)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	end := time.NewTimer(limit)
	defer end.Stop()
	tick := time.NewTicker(Poll)
	defer tick.Stop()
	var last []byte
	for {
		ev := next()
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
		case <-end.C:
			send(Event{Phase: sandboxmgr.PhaseFailed, Reason: sandboxmgr.ReasonReadyTimeout,
				Msg: "The sandbox did not become ready in time."})
			return
		case <-tick.C:
		}
	}
}
