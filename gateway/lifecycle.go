package gateway

import (
	"net/http"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// coldStart answers a browser navigation to a cold sandbox with the waiting
// page (template cold_start: waiting-page) and reports true when it did.
func (g *Gateway) coldStart(w http.ResponseWriter, r *http.Request, t *table, rt route, tpl *config.Template) bool {
	return false
}

// ensure wakes or creates the sandbox for r, applying the wake policy and
// the create caps. sub is the token subject ("" when public).
func (g *Gateway) ensure(r *http.Request, t *table, id string, tpl *config.Template, sub string) (sandboxmgr.Endpoint, error) {
	return g.sb.Ensure(r.Context(), id, tpl)
}
