package admin

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

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
	if ic, ok := a.o.Sandboxes.(ImageChecker); ok && cfg.Runtime.Kind != config.RuntimeKubernetes {
		ctx, cancel := context.WithTimeout(ctx, warnBudget)
		defer cancel()
		for _, name := range slices.Sorted(maps.Keys(cfg.Templates)) {
			img := cfg.Templates[name].Image
			if img == "" || img == config.DemoImage {
				continue
			}
			has, err := ic.HasImage(ctx, img)
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
// calls it when it hands out a new id's URL.
func (a *admin) announce(w http.ResponseWriter, r *http.Request) {
	if a.o.Announce == nil {
		writeJSON(w, http.StatusNotFound, errBody("no on-demand certificates here", "not_found"))
		return
	}
	if !a.o.Announce(r.PathValue("id")) {
		writeJSON(w, http.StatusBadRequest, errBody(badIDMsg, "bad_sandbox_id"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"announced": r.PathValue("id"), "for_seconds": 3600})
}
