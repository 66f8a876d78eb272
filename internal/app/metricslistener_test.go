package app

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/metrics"
)

// TestMetricsListener: listen.metrics serves /metrics without the admin
// token and nothing else; unset, nothing listens (#16: Prometheus
// scrapers had to carry the admin token).
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	off := &App{cfg: cfg, log: slog.New(slog.DiscardHandler), metrics: metrics.New(), errc: make(chan error, 1)}
	if err := off.listenMetrics(); err != nil || len(off.servers) != 0 {
		t.Fatalf("listen.metrics unset: %v, %d servers; want none", err, len(off.servers))
	}

	cfg = config.Default()
	cfg.Listen.Metrics = testkit.DeadAddr(t) // free: nothing listens there yet
	a := &App{cfg: cfg, log: slog.New(slog.DiscardHandler), metrics: metrics.New(), errc: make(chan error, 1)}
	a.metrics.Request("app", 200, 0, false)
	if err := a.listenMetrics(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range a.servers {
			s.Close()
		}
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + cfg.Listen.Metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `previewgate_requests_total{code="2xx",template="app"} 1`) {
		t.Errorf("/metrics: got %d %.200q, want 200 with the series", code, body)
	}
	for _, p := range []string{"/admin/config", "/admin/sandboxes", "/healthz", "/"} {
		if code, _ := get(p); code != http.StatusNotFound {
			t.Errorf("%s on the metrics listener: got %d, want 404", p, code)
		}
	}
}
