package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr"
)

// Where the time of a wake went (#22). A request that waits for its
// sandbox's wake carries Server-Timing: the part of its wait spent in each
// phase (queued, create, start, app = waiting for the app's port), then
// proxy (the app's time to its response head), so a browser's developer
// tools and a backend both see it. The phases add up to the request's
// wait, because each one is the request's wait clipped to the span in
// which the manager's marks (sandboxmgr.Progress.Marks) put that phase.
// The per-phase histograms are the manager's (Observer.WakePhase): once
// per wake, however many requests waited for it.

// watchWake notes when a request starts to wait for id's wake; end, called
// when the wait is over, returns how the wait split into phases.
func (g *Gateway) watchWake(id string) (end func() []sandboxmgr.PhaseSpan) {
	begin := time.Now()
	return func() []sandboxmgr.PhaseSpan {
		return sandboxmgr.Spans(g.sb.Progress(id).Marks, begin, time.Now())
	}
}

// wakeTiming is what a request that waited carries to the proxy.
type wakeTiming struct {
	spans      []sandboxmgr.PhaseSpan
	proxyStart time.Time
}

// serverTiming is the Server-Timing value for t, with the proxy's time so
// far.
func (t *wakeTiming) serverTiming() string {
	var b strings.Builder
	for _, s := range t.spans {
		fmt.Fprintf(&b, "%s;dur=%.1f, ", s.Name, float64(s.D.Microseconds())/1000)
	}
	fmt.Fprintf(&b, "proxy;dur=%.1f", float64(time.Since(t.proxyStart).Microseconds())/1000)
	return b.String()
}

// addServerTiming adds t's Server-Timing to h (a response head about to
// be written), after any the app sent. h's slices may share a backing
// array with the app's other values: never appended to in place.
func (t *wakeTiming) addServerTiming(h http.Header) {
	if t == nil {
		return
	}
	h["Server-Timing"] = append(slices.Clip(h["Server-Timing"]), t.serverTiming())
}
