package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestMetricsAfterKnownSequence: a create, a wake, a 401 and a 429 move
// their counters by exactly one each.
func TestMetricsAfterKnownSequence(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) {
		// Two requests pass, the third from this IP is refused.
		c.Limits.PerIP = &config.Rate{Rate: 0.0001, Burst: 2}
	})
	before := testkit.Scrape(t, e.metrics.Handler())
	id := dockertest.UniqueID("metrics")

	wantStatus(t, e.get(id, "/"), 200) // create
	c := e.onlyContainer(id)
	if err := e.cli.ContainerStop(context.Background(), c.ID, container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	// Let the stop event reach the manager so the next request is a wake.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := e.mgr.Manager.Cached(id); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("stop not noticed through Docker events")
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantStatus(t, e.get(id, "/"), 200)                                                          // wake
	wantStatus(t, testkit.Request(t, e.srv, "GET", "sandbox-"+id+"."+testDomain, "/", ""), 401) // no token
	wantStatus(t, e.get(id, "/"), 429)                                                          // third request from this IP

	after := testkit.Scrape(t, e.metrics.Handler())
	for _, tc := range []struct {
		series string
		delta  float64
	}{
		{`previewgate_cold_starts_total{kind="create"}`, 1},
		{`previewgate_cold_starts_total{kind="wake"}`, 1},
		{`previewgate_cold_start_duration_seconds_count{kind="create"}`, 1},
		{`previewgate_auth_failures_total{reason="missing"}`, 1},
		{`previewgate_limit_rejections_total{reason="ip"}`, 1},
		{`previewgate_requests_total{code="2xx",template="app"}`, 2},
		{`previewgate_requests_total{code="4xx",template="app"}`, 1},
		{`previewgate_requests_total{code="4xx",template="none"}`, 1},
	} {
		if got := after[tc.series] - before[tc.series]; got != tc.delta {
			t.Errorf("%s moved by %v, want %v", tc.series, got, tc.delta)
		}
	}
}
