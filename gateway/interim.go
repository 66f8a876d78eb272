package gateway

import (
	"net/http"

	"github.com/previewgate/previewgate/internal/upstream"
	"github.com/previewgate/previewgate/internal/wire"
)

// interimGuard is the ResponseWriter ReverseProxy gets. ReverseProxy
// forwards each interim (1xx) answer from its own trace hook, which runs
// before upstream.BoundHeads counts it and copies every header it has;
// the guard applies the direct path's rules before anything reaches the
// client: end-to-end headers only, at most upstream.MaxInterim answers
// (beyond that an answer is dropped, and BoundHeads fails the exchange
// with a 502). Each head is within upstream.MaxResponseHead: net/http
// read it under that bound.
type interimGuard struct {
	http.ResponseWriter
	n int
}

func (g *interimGuard) WriteHeader(code int) {
	if code < 100 || code > 199 {
		g.ResponseWriter.WriteHeader(code)
		return
	}
	// ReverseProxy has copied the interim answer's headers into Header();
	// it clears them after this call.
	h := g.ResponseWriter.Header()
	if g.n++; g.n > upstream.MaxInterim {
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
func (g *interimGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }
