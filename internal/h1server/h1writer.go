package h1server

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/previewgate/previewgate/internal/wire"
)

// h1writer is the lean loop's http.ResponseWriter. It frames a response
// the way net/http's server does, so a handler cannot tell the two apart:
// Content-Length when the handler declared one, or when it finished having
// written at most h1Unframed bytes; chunked (with trailers) otherwise;
// Content-Type sniffed when unset; Date added; no body for HEAD, 1xx, 204
// and 304. One difference: the head is written when the body starts (or
// at Flush or the end), so header changes between WriteHeader and the
// first Write are sent; net/http snapshots at WriteHeader.
type h1writer struct {
	c             *h1conn
	req           *http.Request
	header        http.Header
	status        int
	wroteHeader   bool // a final status is set
	headSent      bool // the head is in the connection's buffer
	head          bool // the request is HEAD: count the body, send none
	bodyAllowed   bool
	chunked       bool
	trailers      bool     // Trailer declared or http.TrailerPrefix keys set
	lateTrailers  []string // declared trailers not set at WriteHeader: never in the head
	clInvalid     bool     // the handler's Content-Length was dropped: no automatic one
	contentLength int64    // declared by the handler, or -1
	written       int64
	pending       []byte // body held until the framing is known
	closeAfter    bool   // close the connection after this response
	err           error  // a write failed: the connection is done
}

// h1Unframed is how much body is held back to send a Content-Length
// instead of chunks (net/http's bufferBeforeChunkingSize).
const h1Unframed = 2048

// newH1writer returns the writer for one response on c. It borrows c's
// hold-back buffer until done.
func newH1writer(c *h1conn, req *http.Request) *h1writer {
	return &h1writer{c: c, req: req, header: make(http.Header), pending: c.pending[:0], contentLength: -1,
		head: req.Method == http.MethodHead, closeAfter: req.Close}
}

// done ends the writer's use of the connection: a goroutine the handler
// left behind gets errors, not the next response.
func (w *h1writer) done() {
	w.c.pending = w.pending[:0]
	w.pending = nil
	w.req = nil
	w.err = errWriterDone
}

var errWriterDone = errors.New("response already finished")

func (w *h1writer) Header() http.Header { return w.header }

func (w *h1writer) WriteHeader(code int) {
	if w.wroteHeader || w.err != nil {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.writeInterim(code)
		return
	}
	w.wroteHeader = true
	w.status = code
	w.bodyAllowed = code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
	if cl := w.header.Get("Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.s.log.Debug("handler set an invalid Content-Length; dropped", "value", cl)
			w.header.Del("Content-Length")
			w.clInvalid = true
		}
	}
	for _, line := range w.header["Trailer"] {
		w.trailers = true
		for _, k := range strings.Split(line, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if _, ok := w.header[k]; !ok {
				w.lateTrailers = append(w.lateTrailers, k)
			}
		}
	}
	for k := range w.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			w.trailers = true
		}
	}
	if v := w.header["Connection"]; len(v) > 0 && wire.ContainsToken(v, "close") {
		w.closeAfter = true
	}
}

// writeInterim sends a 1xx answer (103 Early Hints) at once.
func (w *h1writer) writeInterim(code int) {
	if w.err != nil {
		return
	}
	bw := w.c.bw
	bw.WriteString(statusLines[code])
	w.writeFields(func(k string) bool { return k == "Content-Length" || k == "Transfer-Encoding" })
	bw.WriteString("\r\n")
	w.err = bw.Flush()
}

func (w *h1writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyAllowed {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.contentLength >= 0 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if !w.headSent {
		if w.contentLength < 0 && len(w.pending)+len(p) <= h1Unframed {
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		w.sendHead(w.contentLength < 0, p)
	}
	if w.head || len(p) == 0 {
		return len(p), w.err
	}
	w.writeBody(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

func (w *h1writer) writeBody(p []byte) {
	bw := w.c.bw
	if w.chunked {
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(p)), 16))
		bw.WriteString("\r\n")
		bw.Write(p)
		_, w.err = bw.WriteString("\r\n")
		return
	}
	_, w.err = bw.Write(p)
}

// sendHead writes the status line and headers, then whatever body was
// held back. sniff is the first body bytes, for Content-Type.
func (w *h1writer) sendHead(chunked bool, sniff []byte) {
	w.headSent = true
	w.chunked = chunked && w.bodyAllowed && !w.head
	bw := w.c.bw
	bw.WriteString(statusLines[w.status])
	h := w.header
	w.writeFields(func(k string) bool {
		switch k {
		case "Transfer-Encoding":
			return true // framing is ours
		case "Content-Length":
			return !w.bodyAllowed
		case "Content-Type":
			return w.status == http.StatusNotModified
		}
		return strings.HasPrefix(k, http.TrailerPrefix) || slices.Contains(w.lateTrailers, k)
	})
	if _, ok := h["Date"]; !ok {
		bw.WriteString(dateLine(time.Now()))
	}
	if w.bodyAllowed {
		if _, ok := h["Content-Type"]; !ok && h.Get("Content-Encoding") == "" {
			if len(w.pending) > 0 {
				sniff = w.pending
			}
			if len(sniff) > 0 {
				bw.WriteString("Content-Type: ")
				bw.WriteString(http.DetectContentType(sniff))
				bw.WriteString("\r\n")
			}
		}
	}
	if w.chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if (w.closeAfter || w.c.s.closing.Load()) && !wire.ContainsToken(h["Connection"], "close") {
		w.closeAfter = true
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
	if len(w.pending) > 0 && !w.head {
		w.writeBody(w.pending)
	}
	w.pending = w.pending[:0]
}

// writeFields writes the header lines not skipped, sanitized as net/http
// does: invalid names dropped, line breaks in values turned to spaces.
func (w *h1writer) writeFields(skip func(string) bool) {
	bw := w.c.bw
	for k, vv := range w.header {
		if skip(k) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vv {
			writeField(bw, k, v)
		}
	}
}

// Flush sends the head and what the body has so far; an unknown length is
// chunked from here on.
func (w *h1writer) Flush() { w.FlushError() }

// FlushError is Flush for http.ResponseController.
func (w *h1writer) FlushError() error {
	if w.err != nil {
		return w.err
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		w.sendHead(w.contentLength < 0, nil)
	}
	if w.err == nil {
		w.err = w.c.bw.Flush()
	}
	return w.err
}

// finish completes the response after the handler returned and reports
// whether the connection is still sound.
func (w *h1writer) finish() bool {
	if w.err != nil {
		return false
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		if w.bodyAllowed && w.contentLength < 0 && !w.trailers && !w.clInvalid && (!w.head || w.written > 0) {
			// The whole body is known: say how long it is.
			w.contentLength = w.written
			w.header["Content-Length"] = []string{strconv.FormatInt(w.written, 10)}
		}
		w.sendHead(w.contentLength < 0, nil)
	}
	bw := w.c.bw
	if w.chunked {
		bw.WriteString("0\r\n")
		w.writeTrailers()
		bw.WriteString("\r\n")
	}
	if w.bodyAllowed && !w.head && w.contentLength >= 0 && w.written != w.contentLength {
		w.closeAfter = true // the client would read the next response as body
	}
	if w.err == nil {
		w.err = bw.Flush()
	}
	return w.err == nil
}

// writeTrailers writes the declared trailers' values and the
// http.TrailerPrefix keys.
func (w *h1writer) writeTrailers() {
	bw := w.c.bw
	for _, line := range w.header["Trailer"] {
		for _, k := range strings.Split(line, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if !httpguts.ValidHeaderFieldName(k) || wire.HopByHop(k, nil) || k == "Content-Length" {
				continue
			}
			for _, v := range w.header[k] {
				writeField(bw, k, v)
			}
		}
	}
	for k, vv := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && httpguts.ValidHeaderFieldName(name) {
			for _, v := range vv {
				writeField(bw, name, v)
			}
		}
	}
}

// writeField writes one sanitized header or trailer line.
func writeField(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(fieldValue(v))
	bw.WriteString("\r\n")
}

// fieldValue is v as net/http writes it: line breaks become spaces, and
// surrounding white space goes. Byte scans, not strings.ContainsAny and
// Trim, which build a byte set on every call: ~300 instructions for each
// field of every response (#25).
func fieldValue(v string) string {
	if strings.IndexByte(v, '\r') >= 0 || strings.IndexByte(v, '\n') >= 0 {
		v = newlineToSpace.Replace(v)
	}
	return wire.TrimOWS(v) // no CR or LF is left to trim
}

var newlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

// statusLines holds "HTTP/1.1 <code> <text>\r\n" for every code.
var statusLines = func() (l [1000]string) {
	for code := 100; code < 1000; code++ {
		text := http.StatusText(code)
		if text == "" {
			text = "status code " + strconv.Itoa(code)
		}
		l[code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n"
	}
	return
}()
