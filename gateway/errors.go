package gateway

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"
)

// httpError is a handler failure. The client sees Msg (and Code); Err goes
// to the log only.
type httpError struct {
	Status     int
	Code       string // machine-readable, e.g. "bad_host"
	Msg        string // safe to show
	Err        error  // internal detail for the log; may be nil
	RetryAfter int    // seconds; 0 means no Retry-After header
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

// wantsHTML reports whether the client is a browser that prefers a page.
func wantsHTML(r *http.Request) bool {
	accept := r.Header.Get("Accept")
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
		fmt.Fprintf(w, errorPage, e.Status, html.EscapeString(http.StatusText(e.Status)),
			html.EscapeString(http.StatusText(e.Status)), html.EscapeString(e.Msg), html.EscapeString(e.Code))
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}{e.Msg, e.Code})
}

const errorPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>%d %s</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:15vh auto;padding:0 1em;color:#222}
h1{font-size:1.4em}code{color:#666}</style></head>
<body><h1>%s</h1><p>%s</p><p><code>%s</code> · previewgate</p></body></html>
`
