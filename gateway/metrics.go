package gateway

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the gateway's Prometheus series. Per-request series are
// resolved once per (template, status class) and cached, so the hot path
// does no label hashing.
type metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec   // template, code (status class)
	proxyTime   *prometheus.HistogramVec // template
	rejections  *prometheus.CounterVec   // reason
	reloads     *prometheus.CounterVec   // result
	authFails   *prometheus.CounterVec   // reason
	coldStarts  *prometheus.CounterVec   // kind
	coldTime    *prometheus.HistogramVec // kind
	websockets  prometheus.Gauge
	certEvents  *prometheus.CounterVec // event
	byTemplate  sync.Map               // template name → *templateSeries
	sandboxesFn func() map[string]int
}

type templateSeries struct {
	codes [6]prometheus.Counter // index: status / 100
	proxy prometheus.Observer
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "previewgate_requests_total",
		Help: "Requests on preview hosts by template and status class (2xx, 4xx, ...)."}, []string{"template", "code"})
	m.proxyTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "previewgate_proxy_duration_seconds",
		Help:    "Time from receiving a preview request to the end of its proxied response (not for upgrades).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"template"})
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "previewgate_limit_rejections_total",
		Help: "Requests refused by a limit, by reason."}, []string{"reason"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "previewgate_config_reloads_total",
		Help: "Config reload attempts by result."}, []string{"result"})
	m.authFails = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "previewgate_auth_failures_total",
		Help: "Requests refused by the access check, by reason."}, []string{"reason"})
	m.coldStarts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "previewgate_cold_starts_total",
		Help: "Sandbox cold starts by kind (wake, create, pool)."}, []string{"kind"})
	m.coldTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "previewgate_cold_start_duration_seconds",
		Help:    "Time from the start of a cold start until the app was ready, by kind.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2, 5, 10, 20, 40, 60}}, []string{"kind"})
	m.websockets = prometheus.NewGauge(prometheus.GaugeOpts{Name: "previewgate_websockets_open",
		Help: "Open proxied WebSocket connections."})
	m.certEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "previewgate_certificate_events_total",
		Help: "Certificate events (obtained, renewed, failed)."}, []string{"event"})
	m.reg.MustRegister(m.requests, m.proxyTime, m.rejections, m.reloads, m.authFails, m.coldStarts, m.coldTime,
		m.websockets, m.certEvents, &stateCollector{m: m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(r)
	}
	return m
}

// stateCollector reports sandboxes by state from the manager's cache.
type stateCollector struct{ m *metrics }

var sandboxStateDesc = prometheus.NewDesc("previewgate_sandboxes", "Sandboxes by state.", []string{"state"}, nil)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sandboxStateDesc }
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.m.sandboxesFn == nil {
		return
	}
	for state, n := range c.m.sandboxesFn() {
		ch <- prometheus.MustNewConstMetric(sandboxStateDesc, prometheus.GaugeValue, float64(n), state)
	}
}

func (m *metrics) series(template string) *templateSeries {
	if s, ok := m.byTemplate.Load(template); ok {
		return s.(*templateSeries)
	}
	s := &templateSeries{proxy: m.proxyTime.WithLabelValues(template)}
	for i := range s.codes {
		s.codes[i] = m.requests.WithLabelValues(template, strconv.Itoa(i)+"xx")
	}
	actual, _ := m.byTemplate.LoadOrStore(template, s)
	return actual.(*templateSeries)
}

// observe counts one finished request.
func (m *metrics) observe(template string, status int, took time.Duration, proxied bool) {
	s := m.series(template)
	class := status / 100
	if class < 0 || class >= len(s.codes) {
		class = 0
	}
	s.codes[class].Inc()
	if proxied {
		s.proxy.Observe(took.Seconds())
	}
}

// ColdStart records a cold start of kind (wake, create, pool) that took d.
// The sandbox manager reports through it.
func (g *Gateway) ColdStart(kind string, d time.Duration) {
	g.metrics.coldStarts.WithLabelValues(kind).Inc()
	g.metrics.coldTime.WithLabelValues(kind).Observe(d.Seconds())
}

// ReloadResult counts a config reload attempt ("success" or "failure").
func (g *Gateway) ReloadResult(result string) { g.metrics.reloads.WithLabelValues(result).Inc() }

// CertEvent counts a certificate event.
func (g *Gateway) CertEvent(event string) { g.metrics.certEvents.WithLabelValues(event).Inc() }

// SandboxStates sets the source of the sandboxes-by-state gauge.
func (g *Gateway) SandboxStates(f func() map[string]int) { g.metrics.sandboxesFn = f }

// MetricsHandler serves the Prometheus exposition of the gateway's metrics.
func (g *Gateway) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(g.metrics.reg, promhttp.HandlerOpts{})
}

// statusWriter records the status of a response for metrics and logs.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets handlers that type-assert http.Flusher (not only
// ResponseController users) stream.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}
