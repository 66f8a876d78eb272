package meter

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Timing is where a request's wait went, for its response's
// Server-Timing field (W3C Server Timing), which a browser's developer
// tools and a backend read: named spans, then "proxy", the time from
// ProxyStart to the response head being written.
type Timing struct {
	Spans      []Span
	ProxyStart time.Time
}

// Span is a named part of a request's time.
type Span struct {
	Name string
	D    time.Duration
}

// value is t's Server-Timing value, with the proxy's time so far:
// "name;dur=<milliseconds, one decimal>", comma-separated.
func (t *Timing) value() string {
	var b strings.Builder
	for _, s := range t.Spans {
		fmt.Fprintf(&b, "%s;dur=%.1f, ", s.Name, float64(s.D.Microseconds())/1000)
	}
	fmt.Fprintf(&b, "proxy;dur=%.1f", float64(time.Since(t.ProxyStart).Microseconds())/1000)
	return b.String()
}

// AddTo adds t's Server-Timing to h (a response head about to be
// written), after any the app sent; a nil t adds nothing. h's slices may
// share a backing array with the app's other values: never appended to
// in place.
func (t *Timing) AddTo(h http.Header) {
	if t == nil {
		return
	}
	h["Server-Timing"] = append(slices.Clip(h["Server-Timing"]), t.value())
}
