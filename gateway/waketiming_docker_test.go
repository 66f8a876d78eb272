package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestDockerServerTiming: a cold request through the real engine carries
// Server-Timing whose phases (create, start, app, proxy) add up to within
// 50 ms of the wait the client measured, and the phase histograms get
// the wake (#22).
func TestDockerServerTiming(t *testing.T) {
	t.Parallel()
	e := newDockerEnv(t, func(c *config.Config) {
		c.Templates["app"].Env = map[string]string{"LISTEN_DELAY": "500ms"}
	})
	id := dockertest.UniqueID("timing")
	tok := testkit.Mint(t, e.cfg, id, time.Hour) // before the clock: not part of the wait
	t0 := time.Now()
	resp := testkit.Request(t, e.srv, "GET", "sandbox-"+id+"."+testDomain, "/", tok)
	total := time.Since(t0)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d, want 200", resp.StatusCode)
	}
	st := resp.Header.Get("Server-Timing")
	got := map[string]float64{}
	var sum float64
	for _, part := range strings.Split(st, ", ") {
		name, dur, _ := strings.Cut(part, ";dur=")
		d, err := strconv.ParseFloat(dur, 64)
		if err != nil {
			t.Fatalf("Server-Timing %q: bad part %q", st, part)
		}
		got[name] += d
		sum += d
	}
	for _, name := range []string{"create", "app", "proxy"} {
		if _, ok := got[name]; !ok {
			t.Errorf("Server-Timing %q lacks %s", st, name)
		}
	}
	if got["app"] < 400 {
		t.Errorf("Server-Timing %q: app %.1f ms, want at least the app's 500 ms delay less a probe interval", st, got["app"])
	}
	// What no phase covers: the client's connect and write, the head's
	// parse and the token's check, under -race on a loaded machine (a
	// 20 ms gap failed CI with 15). Create, start or app left out would
	// be 180 ms or more here, so 50 ms still catches one.
	ms := float64(total.Microseconds()) / 1000
	if sum > ms || sum < ms-50 {
		t.Errorf("Server-Timing %q adds up to %.1f ms; the client waited %.1f ms: want within 50 ms below", st, sum, ms)
	}
	if n := testkit.Scrape(t, e.metrics.Handler())[`previewgate_wake_phase_duration_seconds_count{phase="app",template="app"}`]; n < 1 {
		t.Errorf("no app phase in previewgate_wake_phase_duration_seconds (count %v)", n)
	}
}
