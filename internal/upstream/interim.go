package upstream

import (
	"net/http"

	"github.com/previewgate/previewgate/internal/wire"
)

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
