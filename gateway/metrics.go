package gateway

import (
	"bufio"
	"net"
	"net/http"
	"time"
)

// Metrics is where the gateway reports what it did (*metrics.Metrics
// implements it). The methods are called on the request path: they must be
// cheap, safe for concurrent use, and must not block.
type Metrics interface {
	// Request counts one finished request on a preview host. template is
	// the template's name, "upstream" or "none"; took counts as proxy time
	// only when proxied (never for upgrades).
	Request(template string, status int, took time.Duration, proxied bool)
	// Rejected counts a request refused by a limit, by reason (ip, ...).
	Rejected(reason string)
	// AuthFailed counts a request refused by the access check, by reason.
	AuthFailed(reason string)
	// WebSocketOpened and WebSocketClosed bracket each proxied WebSocket.
	WebSocketOpened()
	WebSocketClosed()
}

// noMetrics records nothing: Options.Metrics left nil.
type noMetrics struct{}

func (noMetrics) Request(string, int, time.Duration, bool) {}
func (noMetrics) Rejected(string)                          {}
func (noMetrics) AuthFailed(string)                        {}
func (noMetrics) WebSocketOpened()                         {}
func (noMetrics) WebSocketClosed()                         {}

// orNoMetrics is m, or noMetrics when m is nil.
func orNoMetrics(m Metrics) Metrics {
	if m == nil {
		return noMetrics{}
	}
	return m
}

// statusWriter records the status of a response for metrics and logs.
type statusWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool      // an upgrade took the connection (its 101 is written raw)
	written  int64     // body bytes written to the client (traffic.go)
	body     countBody // the request body's bytes read (traffic.go)
}

// Hijack lets http.ResponseController reach the connection and notes that
// the request was upgraded.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, brw, err
}

// final is the status the request is recorded with: 101 for an upgrade;
// when nothing was written, 499 if the client went away (fail writes
// nothing then), else the 200 net/http sends for a handler that wrote
// nothing.
func (w *statusWriter) final(r *http.Request) int {
	switch {
	case w.hijacked:
		return http.StatusSwitchingProtocols
	case w.status != 0:
		return w.status
	case r.Context().Err() != nil:
		return statusClientClosed
	}
	return http.StatusOK
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets handlers that type-assert http.Flusher (not only
// ResponseController users) stream.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}
