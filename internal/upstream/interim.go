package upstream

import (
	"net/http"

	"github.com/previewgate/previewgate/internal/wire"
)

// InterimGuard is the ResponseWriter to hand httputil.ReverseProxy. ReverseProxy
// forwards each interim (1xx) answer from its own trace hook, which runs
// before BoundHeads counts it and copies every header it has;
// the guard applies the direct path's rules before anything reaches the
// client: end-to-end headers only, at most MaxInterim answers
// (beyond that an answer is dropped, and BoundHeads fails the exchange
// with a 502). Each head is within MaxResponseHead: net/http
// read it under that bound.
type InterimGuard struct {
	http.ResponseWriter
	n int
}

func (g *InterimGuard) WriteHeader(code int) {
	if code < 100 || code > 199 {
		NoSniff(g.ResponseWriter.Header())
		g.ResponseWriter.WriteHeader(code)
		return
	}
	// ReverseProxy has copied the interim answer's headers into Header();
	// it clears them after this call.
	h := g.ResponseWriter.Header()
	if g.n++; g.n > MaxInterim {
		return
	}
	conn := wire.ConnectionTokens(h)
	for k := range h {
		if wire.HopByHop(k, conn) {
			delete(h, k)
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController (ReverseProxy's flushes) reach w.
func (g *InterimGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// ForwardInterim passes a 1xx interim answer (103 Early Hints) on to the
// client as ReverseProxy does, with its end-to-end headers only; the
// response's own headers are left as they were.
func ForwardInterim(w http.ResponseWriter, status int, header http.Header) {
	h := w.Header()
	conn := wire.ConnectionTokens(header)
	saved := make(http.Header, len(header))
	for k, vv := range header {
		if wire.HopByHop(k, conn) {
			continue
		}
		saved[k] = h[k]
		h[k] = vv
	}
	w.WriteHeader(status)
	for k, vv := range saved {
		if vv == nil {
			delete(h, k)
		} else {
			h[k] = vv
		}
	}
}

// CopyEndToEnd copies src's end-to-end headers into dst.
func CopyEndToEnd(dst, src http.Header) {
	conn := wire.ConnectionTokens(src)
	for k, vv := range src {
		if !wire.HopByHop(k, conn) {
			dst[k] = vv
		}
	}
}
