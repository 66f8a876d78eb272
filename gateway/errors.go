package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"

	"github.com/previewgate/previewgate/sandboxmgr"
)

// httpError is a handler failure. The client sees Msg (and Code); Err goes
// to the log only.
type httpError struct {
	Status     int
	Code       string // machine-readable, e.g. "bad_host"
	Msg        string // safe to show
	Err        error  // internal detail for the log; may be nil
	RetryAfter int    // seconds; 0 means no Retry-After header
	// A failed start (#16): why (a sandboxmgr.Reason* constant), the app's
	// exit code and its last output. The output is the sandbox's, hostile:
	// sanitized by the manager, bounded by pageLogs, escaped by the page's
	// template and the JSON encoder.
	Reason   string
	ExitCode *int
	Logs     []string
}

func (e *httpError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Code, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Code)
}

func (e *httpError) Unwrap() error { return e.Err }

// statusClientClosed is logged when the client went away before we answered.
const statusClientClosed = 499

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
		Logs: pageLogs(se.Logs)}
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

// Bounds on the output a page or a JSON error shows (the manager already
// keeps no more; this holds whatever Sandboxes implementation is wired).
const (
	pageLogLines = sandboxmgr.LogTailLines
	pageLogRunes = sandboxmgr.LogLineMax
)

// pageLogs returns the last pageLogLines of lines, each sanitized again and
// cut to pageLogRunes.
func pageLogs(lines []string) []string {
	if len(lines) == 0 {
		return nil
	}
	lines = lines[max(0, len(lines)-pageLogLines):]
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = sandboxmgr.SanitizeLine(l, pageLogRunes)
	}
	return out
}

// wantsHTML reports whether the client is a browser that prefers a page.
func wantsHTML(r *http.Request) bool {
	accept := headerValue(r.Header, "Accept")
	return strings.Contains(accept, "text/html")
}

// writeError answers with an HTML page for browsers, JSON otherwise.
func writeError(w http.ResponseWriter, r *http.Request, e *httpError) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if wantsHTML(r) {
		h.Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(e.Status)
		heading := http.StatusText(e.Status)
		if e.Reason != "" {
			heading = "The preview could not be started"
		}
		_ = errorPage.Execute(w, struct {
			Status         int
			Text, Heading  string
			Msg, Code      string
			Logs           []string
			Retry, Failure bool
		}{e.Status, http.StatusText(e.Status), heading, e.Msg, e.Code, e.Logs,
			e.Reason != "" || e.RetryAfter > 0 || e.Status >= 500, e.Reason != ""})
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(struct {
		Error    string   `json:"error"`
		Code     string   `json:"code"`
		Reason   string   `json:"reason,omitempty"`
		ExitCode *int     `json:"exit_code,omitempty"`
		Logs     []string `json:"logs,omitempty"`
	}{e.Msg, e.Code, e.Reason, e.ExitCode, e.Logs})
}

// pageStyle is shared by the error and waiting pages: no external assets.
const pageStyle = `:root{color-scheme:light dark;--fg:#1d2330;--mute:#6b7385;--bg:#f6f7fb;--card:#fff;--line:#e3e6ee;--acc:#3b6cf6;--bad:#c62f3a;--ok:#1f9d55}
@media (prefers-color-scheme:dark){:root{--fg:#e6e9f2;--mute:#99a1b3;--bg:#12151c;--card:#1b1f29;--line:#2c3240;--acc:#6f95ff;--bad:#ff6b76;--ok:#3ccf7e}}
*{box-sizing:border-box}body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;padding:1.5em}
main{width:100%;max-width:40em;background:var(--card);border:1px solid var(--line);border-radius:14px;padding:1.8em 2em;box-shadow:0 8px 30px rgba(20,30,60,.08)}
h1{font-size:1.25em;margin:0 0 .3em}p{margin:.4em 0}.mute{color:var(--mute);font-size:.9em}.bad{color:var(--bad)}
pre{background:#0f131a;color:#d7dce6;border-radius:8px;padding:.8em 1em;font:12.5px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace;max-height:22em;overflow:auto;white-space:pre-wrap;word-break:break-word;margin:1em 0 .6em}
button{font:inherit;background:var(--acc);color:#fff;border:0;border-radius:8px;padding:.5em 1.2em;cursor:pointer}button:hover{filter:brightness(1.08)}`

var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{if .Failure}}Preview failed to start{{else}}{{.Status}} {{.Text}}{{end}}</title>
<style>` + pageStyle + `</style></head>
<body><main><h1 {{if .Failure}}class="bad"{{end}}>{{.Heading}}</h1><p id="msg">{{.Msg}}</p>
{{if .Logs}}<p class="mute">Last output of the app:</p><pre id="logs">{{range .Logs}}{{.}}
{{end}}</pre>{{end}}
{{if .Retry}}<p><button onclick="location.reload()">Retry</button></p>{{end}}
<p class="mute"><code>{{.Status}} {{.Code}}</code> · previewgate</p></main></body></html>
`))
