package admin

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/links"
)

// humanBytes is n in B, KiB or MiB.
func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// The admin page's pause, resume and link revoke (#23); the traffic,
// why-awake, settings and links parts are in ui.html, from Info, the
// Traffic log and the sandbox's settings.
func (u *ui) trafficRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /ui/sandboxes/{id}/links/{link}/revoke", u.post(u.op("revoked", func(r *http.Request, id string) error {
		if _, err := u.a.o.Sandboxes.Get(r.Context(), id); err != nil {
			return err
		}
		return links.Revoke(r.Context(), u.a.o.Settings, id, r.PathValue("link"), time.Now().UTC())
	})))
	mux.HandleFunc("POST /ui/sandboxes/{id}/pause", u.post(u.op("paused", func(r *http.Request, id string) error {
		return u.a.o.Sandboxes.Pause(r.Context(), id)
	})))
	mux.HandleFunc("POST /ui/sandboxes/{id}/resume", u.post(u.op("resumed", func(r *http.Request, id string) error {
		_, err := u.a.resume(r.Context(), id) // as long as the API's resume waits
		return err
	})))
}

// links returns sandbox id's unexpired share links for its page, newest
// first; none where the gateway keeps no settings or they cannot be read.
func (u *ui) links(ctx context.Context, id string) []adminapi.Link {
	ls, err := links.List(ctx, u.a.o.Settings, id, time.Now())
	if err != nil {
		return nil
	}
	out := make([]adminapi.Link, 0, len(ls))
	for i := len(ls) - 1; i >= 0; i-- {
		out = append(out, linkOf(ls[i]))
	}
	return out
}
