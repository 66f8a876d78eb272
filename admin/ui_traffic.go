package admin

import (
	"context"
	"fmt"
	"net/http"
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

// The admin page's pause and resume (#23); the traffic and why-awake
// parts are in ui.html, from Info and the Traffic log.
func (u *ui) trafficRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /ui/sandboxes/{id}/pause", u.post(u.op("paused", func(u *ui) func(r *http.Request, id string) error {
		return func(r *http.Request, id string) error { return u.a.o.Sandboxes.Pause(r.Context(), id) }
	})))
	mux.HandleFunc("POST /ui/sandboxes/{id}/resume", u.post(u.op("resumed", func(u *ui) func(r *http.Request, id string) error {
		return func(r *http.Request, id string) error {
			ctx, cancel := context.WithTimeout(r.Context(), resumeTimeout)
			defer cancel()
			_, err := u.a.o.Sandboxes.Resume(ctx, id)
			return err
		}
	})))
}
