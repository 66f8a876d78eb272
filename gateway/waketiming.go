package gateway

import (
	"time"

	"github.com/previewgate/previewgate/internal/meter"
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
// per wake, however many requests waited for it. internal/meter writes
// the field (meter.Timing).

// watchWake notes when a request starts to wait for h's wake; end, called
// when the wait is over, returns how the wait split into phases.
func watchWake(h sandboxmgr.Handle) (end func() []meter.Span) {
	begin := time.Now()
	return func() []meter.Span {
		spans := sandboxmgr.Spans(h.Snapshot().Progress.Marks, begin, time.Now())
		out := make([]meter.Span, len(spans))
		for i, s := range spans {
			out[i] = meter.Span(s)
		}
		return out
	}
}
