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
func (g *Gateway) watchWake(id string) (end func() []phaseSpan) {
	begin := time.Now()
	return func() []phaseSpan {
		return clip(g.sb.Progress(id).Marks, begin, time.Now())
	}
}

// phaseSpan is the part of a request's wait spent in one phase.
type phaseSpan struct {
	name string // Server-Timing name: queued, create, start, app
	d    time.Duration
}

// clip splits [from, to] by marks; the spans add up to to-from. Time
// before the wake's first mark (the request came first) counts as queued.
func clip(marks []sandboxmgr.PhaseMark, from, to time.Time) []phaseSpan {
	if len(marks) == 0 || marks[0].At.After(from) {
		marks = append([]sandboxmgr.PhaseMark{{Phase: sandboxmgr.PhaseQueued, At: from}}, marks...)
	}
	var out []phaseSpan
	for i, m := range marks {
		s, e := m.At, to
		if i+1 < len(marks) {
			e = marks[i+1].At
		}
		if s.Before(from) {
			s = from
		}
		if e.After(to) {
			e = to
		}
		if !e.After(s) {
			continue
		}
		name := sandboxmgr.TimingName(m.Phase)
		if n := len(out); n > 0 && out[n-1].name == name {
			out[n-1].d += e.Sub(s)
		} else {
			out = append(out, phaseSpan{name, e.Sub(s)})
		}
	}
	return out
}

// wakeTiming is what a request that waited carries to the proxy.
type wakeTiming struct {
	spans      []phaseSpan
	proxyStart time.Time
}

// serverTiming is the Server-Timing value for t, with the proxy's time so
// far.
func (t *wakeTiming) serverTiming() string {
	var b strings.Builder
	for _, s := range t.spans {
		fmt.Fprintf(&b, "%s;dur=%.1f, ", s.name, float64(s.d.Microseconds())/1000)
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
