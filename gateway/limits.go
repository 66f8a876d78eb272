package gateway

import (
	"net/http"

	"github.com/previewgate/previewgate/config"
)

// limiter holds rate-limit and connection-count state. It lives as long as
// the Gateway (state survives config reloads); the limits themselves are
// read from the table of each request.
type limiter struct{}

func newLimiter() *limiter { return &limiter{} }

// allow applies the request-rate limits (per client IP, per sandbox, per
// token subject; sub may be empty) and returns a 429 error when one is hit.
func (l *limiter) allow(w http.ResponseWriter, r *http.Request, t *table, rt route, tpl *config.Template, sub string) *httpError {
	return nil
}

// openSocket counts an upgraded connection against the per-sandbox and
// per-IP caps; release must be called when it closes.
func (l *limiter) openSocket(r *http.Request, t *table, sandbox string) (release func(), herr *httpError) {
	return func() {}, nil
}
