// Package metrics holds previewgate's Prometheus series: requests by
// template and status class, proxy time, limit and access refusals, cold
// starts, config reloads, certificate events, open WebSockets and sandboxes
// by state. Components report to a *Metrics they are handed (the gateway,
// sandboxmgr as its Observer, certs and the config watcher through method
// values); the admin API serves Handler.
//
// Every Metrics has its own registry: nothing registers with Prometheus's
// global one, so two gateways in one process (tests) never share a series.
// Reporting methods are safe for concurrent use and cheap enough for the
// request path; they never block and never call back into the reporter.
// The package must never decide anything: it counts what it is told.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the gateway's Prometheus series. Per-request series are
// resolved once per (template, status class) and cached, so the hot path
// does no label hashing. The zero value is not usable; call New.
type Metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec   // template, code (status class)
	proxyTime  *prometheus.HistogramVec // template
	rejections *prometheus.CounterVec   // reason
	reloads    *prometheus.CounterVec   // result
	authFails  *prometheus.CounterVec   // reason
	coldStarts *prometheus.CounterVec   // kind
	coldTime   *prometheus.HistogramVec // kind
	websockets prometheus.Gauge
	certEvents *prometheus.CounterVec   // event
	wakePhases *prometheus.HistogramVec // template, phase
	byTemplate sync.Map                 // template name → *templateSeries
	// states is the source of the sandboxes-by-state gauge (SandboxStates).
	states atomic.Pointer[func() map[string]int]
}

// templateSeries are one template's request series. A status class's
// counter is made at its first request: a series made ahead would be
// exposed at 0 for classes that never happen (and "0xx" for none at all).
type templateSeries struct {
	template string
	codes    [5]atomic.Pointer[prometheus.Counter] // index: status/100 - 1
	proxy    prometheus.Observer
}

// New returns a Metrics with its own registry, holding the Go runtime and
// process collectors besides previewgate's series.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
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
	m.wakePhases = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "previewgate_wake_phase_duration_seconds",
		Help:    "Time a wake spent in each phase (queued, create, start, app: waiting for the app's port), as requests waiting for it saw it.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 20, 40, 60}}, []string{"template", "phase"})
	m.websockets = prometheus.NewGauge(prometheus.GaugeOpts{Name: "previewgate_websockets_open",
		Help: "Open proxied WebSocket connections."})
	m.certEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "previewgate_certificate_events_total",
		Help: "Certificate events (obtained, renewed, failed)."}, []string{"event"})
	m.reg.MustRegister(m.wakePhases, m.requests, m.proxyTime, m.rejections, m.reloads, m.authFails, m.coldStarts, m.coldTime,
		m.websockets, m.certEvents, &stateCollector{m: m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(r)
	}
	return m
}

// stateCollector reports sandboxes by state from the manager's cache.
type stateCollector struct{ m *Metrics }

var sandboxStateDesc = prometheus.NewDesc("previewgate_sandboxes", "Sandboxes by state.", []string{"state"}, nil)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sandboxStateDesc }
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.m.states.Load()
	if f == nil || *f == nil {
		return
	}
	for state, n := range (*f)() {
		ch <- prometheus.MustNewConstMetric(sandboxStateDesc, prometheus.GaugeValue, float64(n), state)
	}
}

func (m *Metrics) series(template string) *templateSeries {
	if s, ok := m.byTemplate.Load(template); ok {
		return s.(*templateSeries)
	}
	s := &templateSeries{template: template, proxy: m.proxyTime.WithLabelValues(template)}
	actual, _ := m.byTemplate.LoadOrStore(template, s)
	return actual.(*templateSeries)
}

// code returns the counter of status's class ("2xx"); a status outside
// 100-599 (none was written, or a bug) counts as "other".
func (m *Metrics) code(s *templateSeries, status int) prometheus.Counter {
	i := status/100 - 1
	if status < 100 || i >= len(s.codes) {
		return m.requests.WithLabelValues(s.template, "other")
	}
	if c := s.codes[i].Load(); c != nil {
		return *c
	}
	c := m.requests.WithLabelValues(s.template, strconv.Itoa(i+1)+"xx")
	s.codes[i].Store(&c) // a racing Store holds the same counter
	return c
}

// Request counts one finished request on a preview host. template is the
// template's name, "upstream" or "none"; took is observed as proxy time
// only when proxied.
func (m *Metrics) Request(template string, status int, took time.Duration, proxied bool) {
	s := m.series(template)
	m.code(s, status).Inc()
	if proxied {
		s.proxy.Observe(took.Seconds())
	}
}

// Rejected counts a request refused by a limit (reason: ip, sandbox, ...).
func (m *Metrics) Rejected(reason string) { m.rejections.WithLabelValues(labelValue(reason)).Inc() }

// AuthFailed counts a request refused by the access check. The reason is
// the one the client is told ("wrong sandbox"); the label is its
// snake_case form ("wrong_sandbox").
func (m *Metrics) AuthFailed(reason string) { m.authFails.WithLabelValues(labelValue(reason)).Inc() }

// WebSocketOpened counts a proxied WebSocket as open.
func (m *Metrics) WebSocketOpened() { m.websockets.Inc() }

// WebSocketClosed counts a proxied WebSocket opened before as closed.
func (m *Metrics) WebSocketClosed() { m.websockets.Dec() }

// WakePhase records how long one phase of a wake of template took.
func (m *Metrics) WakePhase(template, phase string, d time.Duration) {
	m.wakePhases.WithLabelValues(labelValue(template), labelValue(phase)).Observe(d.Seconds())
}

// ColdStart records a cold start of kind (wake, create, pool) that took d.
// It makes *Metrics a sandboxmgr.Observer.
func (m *Metrics) ColdStart(kind string, d time.Duration) {
	kind = labelValue(kind)
	m.coldStarts.WithLabelValues(kind).Inc()
	m.coldTime.WithLabelValues(kind).Observe(d.Seconds())
}

// ReloadResult counts a config reload attempt ("success" or "failure");
// it fits config.WatcherConfig.OnResult.
func (m *Metrics) ReloadResult(result string) { m.reloads.WithLabelValues(result).Inc() }

// CertEvent counts a certificate event; it fits certs.Config.OnEvent.
func (m *Metrics) CertEvent(event string) { m.certEvents.WithLabelValues(labelValue(event)).Inc() }

// labelValue is reason as a label value that queries can write without
// quoting trouble: lowercase letters, digits and underscores ("origin not
// allowed" → "origin_not_allowed"). Reporters pass the words they show
// people; only the series needs the machine form.
func labelValue(reason string) string {
	ok := reason != ""
	for i := 0; i < len(reason) && ok; i++ {
		c := reason[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	if ok {
		return reason // the common case: no allocation
	}
	b := make([]byte, 0, len(reason))
	under := false
	for i := 0; i < len(reason); i++ {
		c := reason[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		default:
			if len(b) > 0 && !under {
				b = append(b, '_')
			}
			under = true
			continue
		}
		b = append(b, c)
		under = false
	}
	if under && len(b) > 0 {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "other"
	}
	return string(b)
}

// SandboxStates sets the source of the sandboxes-by-state gauge
// (sandboxmgr.Manager.States), read at each scrape; nil means none.
func (m *Metrics) SandboxStates(f func() map[string]int) { m.states.Store(&f) }

// Handler serves the Prometheus exposition of m's registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
