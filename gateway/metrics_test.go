package gateway

import (
	"bufio"
	"bytes"
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/config"
)

// scrape reads the gateway's metrics as "name{labels}" → value.
func scrape(t *testing.T, g *Gateway) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	g.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(rec.Body.Bytes()))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// TestMetricsAfterKnownSequence: a create, a wake, a 401 and a 429 move
// their counters by exactly one each.
func TestMetricsAfterKnownSequence(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) {
		// Two requests pass, the third from this IP is refused.
		c.Limits.PerIP = &config.Rate{Rate: 0.0001, Burst: 2}
	})
	before := scrape(t, e.gw)
	id := uniqueID(t, "metrics")

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
	wantStatus(t, e.get(id, "/"), 200)                                                  // wake
	wantStatus(t, request(t, e.srv, "GET", "sandbox-"+id+"."+testDomain, "/", ""), 401) // no token
	wantStatus(t, e.get(id, "/"), 429)                                                  // third request from this IP

	after := scrape(t, e.gw)
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
