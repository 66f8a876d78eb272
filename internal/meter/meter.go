// Package meter measures one exchange as a handler serves it: the status
// the client got, the body bytes read from it and written to it, and
// whether an upgrade took its connection (Writer), which the gateway
// reports to its metrics, its access log and the per-sandbox request log;
// and where the time of a request that waited went, which the client
// reads in the response's Server-Timing (Timing).
//
// A Writer lives by value in the caller's per-request state, so metering
// costs no allocation of its own. It decides nothing about the request
// and keeps nothing of it beyond the counts.
package meter

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// StatusClientClosed is the status recorded for a request whose client
// went away before it was answered (nginx's 499).
const StatusClientClosed = 499

// Writer records the status and body bytes of a response and notes a
// hijack. Start it for each request.
type Writer struct {
	http.ResponseWriter
	status   int
	hijacked bool  // an upgrade took the connection (its 101 is written raw)
	written  int64 // body bytes written to the client
	body     countBody
}

// Start meters w's response to r, and r's body if it has one (r.Body is
// replaced by a counting reader).
func (w *Writer) Start(rw http.ResponseWriter, r *http.Request) {
	w.ResponseWriter = rw
	if r.Body != nil && r.Body != http.NoBody {
		w.body.ReadCloser = r.Body
		r.Body = &w.body
	}
}

// Hijacked reports whether an upgrade took the connection.
func (w *Writer) Hijacked() bool { return w.hijacked }

// Answered reports whether a final status (or a hijack) went to the
// client: nothing else can be answered then.
func (w *Writer) Answered() bool { return w.status != 0 || w.hijacked }

// Written is the body bytes written to the client so far.
func (w *Writer) Written() int64 { return w.written }

// BodyRead is the request body's bytes read so far.
func (w *Writer) BodyRead() int64 { return w.body.n.Load() }

// Hijack lets http.ResponseController reach the connection and notes that
// the request was upgraded.
func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, brw, err
}

// Final is the status the request is recorded with: 101 for an upgrade;
// when nothing was written, StatusClientClosed if the client went away
// (a handler writes nothing then), else the 200 net/http sends for a
// handler that wrote nothing.
func (w *Writer) Final(r *http.Request) int {
	switch {
	case w.hijacked:
		return http.StatusSwitchingProtocols
	case w.status != 0:
		return w.status
	case r.Context().Err() != nil:
		return StatusClientClosed
	}
	return http.StatusOK
}

// WriteHeader records the first final status; an interim one (103
// Early Hints, relayed from the app before its answer) is passed on but
// not recorded, so an app cannot choose the status its 5xx is recorded
// with by sending a 1xx first.
func (w *Writer) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *Writer) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets handlers that type-assert http.Flusher (not only
// ResponseController users) stream.
func (w *Writer) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// countBody counts a request body's bytes as the handler reads them. n is
// atomic: a transport may still be writing the body upstream when the
// handler returns (a response that came before the whole upload).
type countBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (b *countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
