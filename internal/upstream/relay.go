package upstream

import (
	"net/http"
	"strings"

	"github.com/previewgate/previewgate/internal/wire"
)

// RelayHeader copies resp's end-to-end headers into h, the client's
// response header, and announces the trailers resp declared in h's
// Trailer. The caller may then add its own before Relay writes them.
func RelayHeader(h http.Header, resp *Response) {
	conn := wire.ConnectionTokens(resp.Header)
	for k, vv := range resp.Header {
		if !wire.HopByHop(k, conn) {
			h[k] = vv
		}
	}
	if len(resp.Trailer) > 0 {
		names := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			names = append(names, k)
		}
		h["Trailer"] = []string{strings.Join(names, ", ")}
	}
}

// Relay sends resp to w as ReverseProxy would: its status, its body
// (streamed, each read flushed, when it has no known length, such as SSE
// or a dev server's chunked output; left to the server's buffering
// otherwise) and then its trailers; it copies with a buffer from pool.
// It releases resp, whose Body.Close alone decides whether the connection
// is pooled again. An error means the body was cut after the head went
// out: the caller aborts the response (panic(http.ErrAbortHandler)) so
// the client sees a broken body, not a short one.
func Relay(w http.ResponseWriter, resp *Response, pool *BufferPool) error {
	NoSniff(w.Header())
	w.WriteHeader(resp.Status)
	var flush func() error
	if resp.ContentLength == -1 {
		flush = http.NewResponseController(w).Flush
	}
	buf := pool.Get()
	err := CopyBody(w, &resp.Body, buf, flush)
	pool.Put(buf)
	h := w.Header()
	for k, vv := range resp.Trailer {
		h[http.TrailerPrefix+k] = vv
	}
	Release(resp)
	return err
}

// NoSniff keeps the server from adding a Content-Type sniffed from the
// body to an answer the app left untyped: the gateway passes on what the
// app sent, as nginx does. ReverseProxy's own answer would be sniffed or
// not depending on whether its first flush beat the body (an untyped
// chunked answer), so the gateway sets it (Relay).
func NoSniff(h http.Header) {
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
}
