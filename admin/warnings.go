package admin

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
)

// Warnings are what a valid config will fail at later, said when it is
// validated or applied without refusing it (#24, 3: a template whose image
// was missing was accepted in silence).

// warnBudget bounds the engine calls a warning check may make.
const warnBudget = 3 * time.Second

// configWarnings lists what in cfg is valid but will fail later: templates
// whose image the engine lacks (the demo image excepted: serve builds it),
// and settings that wait for a restart.
func (a *admin) configWarnings(ctx context.Context, cfg *config.Config, restart []string) []string {
	out := []string{}
	if ic := a.o.Images; ic != nil && cfg.Runtime.Kind != config.RuntimeKubernetes {
		ctx, cancel := context.WithTimeout(ctx, warnBudget)
		defer cancel()
		for _, name := range slices.Sorted(maps.Keys(cfg.Templates)) {
			img := cfg.Templates[name].Image
			if img == "" || img == config.DemoImage {
				continue
			}
			has, err := ic.Has(ctx, img)
			switch {
			case err != nil:
				out = append(out, fmt.Sprintf("templates.%s: image %s not checked: %v", name, img, err))
			case !has:
				out = append(out, fmt.Sprintf("templates.%s: image %s is not on the engine; its sandboxes cannot start until it is built or pulled", name, img))
			}
		}
	}
	for _, k := range restart {
		out = append(out, k+": saved, but the running value stays until a restart")
	}
	return out
}

// changedKeys lists the settings a replace changed, named as in the file:
// those now live, and those that wait for a restart (kept at their running
// values in after).
func changedKeys(before, after *config.Config, restart []string) []string {
	out := config.Changed(before, after)
	for _, k := range restart {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// announce makes sandbox {id}'s preview names worth an on-demand TLS
// certificate for an hour before the sandbox exists (#24, 7): a backend
// calls it when it hands out a new id's URL. Where no certificate is
// ordered at a handshake it means nothing: 409 no_on_demand_tls says why,
// rather than a 200 the backend would take for a done job.
func (a *admin) announce(w http.ResponseWriter, r *http.Request) {
	if a.o.Announce == nil {
		writeJSON(w, http.StatusNotFound, errBody("no on-demand certificates here", "not_found"))
		return
	}
	id := r.PathValue("id")
	if !config.ValidID(id) {
		writeJSON(w, http.StatusBadRequest, errBody(badIDMsg, "bad_sandbox_id"))
		return
	}
	if msg := noOnDemand(a.o.Config().TLS); msg != "" {
		writeJSON(w, http.StatusConflict, errBody(msg, "no_on_demand_tls"))
		return
	}
	if !a.o.Announce(id) {
		writeJSON(w, http.StatusBadRequest, errBody(badIDMsg, "bad_sandbox_id"))
		return
	}
	writeJSON(w, http.StatusOK, adminapi.Announced{Announced: id, ForSeconds: 3600})
}

// noOnDemand says why an announcement means nothing under the running
// TLS setup (tls.mode needs a restart: the live config holds the running
// one), or "" when certificates are ordered on demand.
func noOnDemand(t config.TLS) string {
	const what = "announce makes an id worth an on-demand certificate (tls.mode acme, tls.acme.strategy on-demand)"
	switch {
	case t.Mode == config.TLSACME && (t.ACME.Strategy == config.StrategyOnDemand || t.ACME.Strategy == ""):
		return ""
	case t.Mode == config.TLSACME:
		return what + "; this gateway uses the " + t.ACME.Strategy + " strategy: one certificate per domain covers every sandbox, nothing to announce"
	case t.Mode == "" || t.Mode == config.TLSOff:
		return what + "; this gateway runs tls.mode off: it serves no certificates, nothing to announce"
	}
	return what + "; this gateway runs tls.mode " + t.Mode + ": its certificates do not depend on sandbox ids, nothing to announce"
}
