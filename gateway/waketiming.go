package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr"
)

// Where the time of a wake went (#22). A request that waits for its
// sandbox's wake carries Server-Timing: the part of its wait spent in each
// phase (queued, create, start, app = waiting for the app's port), then
// proxy (the app's time to its response head), so a browser's developer
// tools and a backend both see it. The phases add up to the request's
// wait, because each one is the request's wait clipped to the span in
// which the manager reported that phase.
//
// The manager reports only the current phase (sandboxmgr.Progress), not
// when each began, so while at least one request waits, one goroutine per
// waking sandbox reads Progress every wakePoll and notes each change: a
// boundary is off by at most wakePoll. Per-phase histograms get each phase
// of a wake whose start and end were both seen.

// wakePoll is how often a watched wake's phase is read.
const wakePoll = 2 * time.Millisecond

// phaseMark is when a phase was first seen.
type phaseMark struct {
	phase string // a sandboxmgr.Phase* constant; "" before the wake shows one
	at    time.Time
}

// wakeWatch follows one sandbox's wake for the requests waiting on it.
type wakeWatch struct {
	mu    sync.Mutex  // guards marks and refs; taken after wakeWatches.mu
	marks []phaseMark // in order; never empty
	refs  int
	stop  chan struct{}
	done  chan struct{}
}

// wakeWatches are the watches of sandboxes being waited for.
type wakeWatches struct {
	mu sync.Mutex // guards m
	m  map[string]*wakeWatch
}

// watchWake joins (or starts) the watch of id's wake; call the result when
// the request's wait ends.
func (g *Gateway) watchWake(id, template string) (end func() []phaseSpan) {
	begin := time.Now()
	ws := &g.wakes
	ws.mu.Lock()
	if ws.m == nil {
		ws.m = make(map[string]*wakeWatch)
	}
	w := ws.m[id]
	if w == nil {
		w = &wakeWatch{marks: []phaseMark{{g.sb.Progress(id).Phase, begin}}, stop: make(chan struct{}), done: make(chan struct{})}
		ws.m[id] = w
		go w.run(g, id, template)
	}
	w.mu.Lock()
	w.refs++
	w.mu.Unlock()
	ws.mu.Unlock()
	return func() []phaseSpan {
		stopAt := time.Now()
		// ws.mu, then w.mu, as when joining: the last one out removes the
		// watch before anyone can join it again, so stop is closed once.
		ws.mu.Lock()
		w.mu.Lock()
		spans := clip(w.marks, begin, stopAt)
		w.refs--
		last := w.refs == 0
		if last {
			delete(ws.m, id)
		}
		w.mu.Unlock()
		ws.mu.Unlock()
		if last {
			close(w.stop)
			<-w.done
		}
		return spans
	}
}

// run notes each phase change until stopped or the wake ended; when
// stopped (the last waiting request got its answer, which is when Ensure
// returned) it reads the phase once more, so a wake that ended is recorded.
func (w *wakeWatch) run(g *Gateway, id, template string) {
	defer close(w.done)
	tick := time.NewTicker(wakePoll)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			w.observe(g, id, template, time.Now())
			return
		case now := <-tick.C:
			if w.observe(g, id, template, now) {
				return
			}
		}
	}
}

// observe notes id's phase at now, and records the wake's phases in the
// metrics when it has ended (reported true).
func (w *wakeWatch) observe(g *Gateway, id, template string, now time.Time) (ended bool) {
	p := g.sb.Progress(id).Phase
	w.mu.Lock()
	changed := p != w.marks[len(w.marks)-1].phase
	if changed {
		w.marks = append(w.marks, phaseMark{p, now})
	}
	marks := w.marks
	w.mu.Unlock()
	ended = p == sandboxmgr.PhaseReady || p == sandboxmgr.PhaseFailed
	if changed && ended {
		// Phases whose start and end were both seen: all but the first.
		for i := 1; i+1 < len(marks); i++ {
			g.metrics.WakePhase(template, timingName(marks[i].phase), marks[i+1].at.Sub(marks[i].at))
		}
	}
	return ended
}

// phaseSpan is the part of a request's wait spent in one phase.
type phaseSpan struct {
	name string // Server-Timing name: queued, create, start, app
	d    time.Duration
}

// clip splits [from, to] by marks; the spans add up to to-from.
func clip(marks []phaseMark, from, to time.Time) []phaseSpan {
	var out []phaseSpan
	for i, m := range marks {
		s, e := m.at, to
		if i+1 < len(marks) {
			e = marks[i+1].at
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
		name := timingName(m.phase)
		if n := len(out); n > 0 && out[n-1].name == name {
			out[n-1].d += e.Sub(s)
		} else {
			out = append(out, phaseSpan{name, e.Sub(s)})
		}
	}
	return out
}

// timingName is a phase's Server-Timing name.
func timingName(phase string) string {
	switch phase {
	case sandboxmgr.PhaseCreating:
		return "create"
	case sandboxmgr.PhaseStarting:
		return "start"
	case sandboxmgr.PhaseWaitingPort, sandboxmgr.PhaseReady:
		return "app" // ready: the moment between the probe and Ensure's return
	case sandboxmgr.PhaseFailed:
		return "failed"
	}
	return "queued"
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
