package meter

import (
	"net/http"
	"regexp"
	"testing"
	"time"
)

// TestTimingAddTo: the spans in order, then the proxy's time, after the
// app's own Server-Timing, without writing into the app's slice.
func TestTimingAddTo(t *testing.T) {
	app := make([]string, 1, 2) // room to append in place
	app[0] = "db;dur=3"
	h := http.Header{"Server-Timing": app}
	tm := &Timing{Spans: []Span{{"queued", 1500 * time.Microsecond}, {"start", 2 * time.Second}},
		ProxyStart: time.Now().Add(-250 * time.Millisecond)}
	tm.AddTo(h)
	got := h["Server-Timing"]
	if len(got) != 2 || got[0] != "db;dur=3" {
		t.Fatalf("Server-Timing %q, want the app's then ours", got)
	}
	if !regexp.MustCompile(`^queued;dur=1\.5, start;dur=2000\.0, proxy;dur=2[5-9]\d\.\d$`).MatchString(got[1]) {
		t.Errorf("value %q", got[1])
	}
	if app[:2][1] != "" {
		t.Errorf("the app's backing array was written: %q", app[:2])
	}
	h = http.Header{}
	(*Timing)(nil).AddTo(h)
	if len(h) != 0 {
		t.Errorf("a nil Timing added %v", h)
	}
}
