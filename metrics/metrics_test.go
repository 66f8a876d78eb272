package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestReports: each reporting method moves its series, and two Metrics
// never share one (no global registry).
func TestReports(t *testing.T) {
	t.Parallel()
	m, other := New(), New()
	m.Request("app", 200, time.Millisecond, true)
	m.Request("app", 404, time.Millisecond, false)
	m.Request("none", 999, 0, false) // out of range: counted as other
	m.Rejected("ip")
	m.AuthFailed("missing")
	m.ColdStart("create", 2*time.Second)
	m.ReloadResult("failure")
	m.CertEvent("cert_obtained")
	m.WebSocketOpened()
	m.WebSocketOpened()
	m.WebSocketClosed()
	m.SandboxStates(func() map[string]int { return map[string]int{"running": 3} })

	got := testkit.Scrape(t, m.Handler())
	for _, tc := range []struct {
		series string
		want   float64
	}{
		{`previewgate_requests_total{code="2xx",template="app"}`, 1},
		{`previewgate_requests_total{code="4xx",template="app"}`, 1},
		{`previewgate_requests_total{code="other",template="none"}`, 1},
		{`previewgate_proxy_duration_seconds_count{template="app"}`, 1},
		{`previewgate_limit_rejections_total{reason="ip"}`, 1},
		{`previewgate_auth_failures_total{reason="missing"}`, 1},
		{`previewgate_cold_starts_total{kind="create"}`, 1},
		{`previewgate_cold_start_duration_seconds_sum{kind="create"}`, 2},
		{`previewgate_config_reloads_total{result="failure"}`, 1},
		{`previewgate_config_reloads_total{result="success"}`, 0},
		{`previewgate_certificate_events_total{event="cert_obtained"}`, 1},
		{`previewgate_websockets_open`, 1},
		{`previewgate_sandboxes{state="running"}`, 3},
	} {
		if v, ok := got[tc.series]; !ok || v != tc.want {
			t.Errorf("%s: got %v (present %v), want %v", tc.series, v, ok, tc.want)
		}
	}
	o := testkit.Scrape(t, other.Handler())
	if v := o[`previewgate_config_reloads_total{result="failure"}`]; v != 0 {
		t.Errorf("another Metrics: got reload failures %v, want 0", v)
	}
	if _, ok := o[`previewgate_sandboxes{state="running"}`]; ok {
		t.Errorf("another Metrics reports sandboxes without a source")
	}
}

// TestNoEmptyClasses: a template's series exist only for the status classes
// it answered; there is never a "0xx" (#16: every template showed
// code="0xx" and "1xx" at 0, and a status of 0 counted as "0xx").
func TestNoEmptyClasses(t *testing.T) {
	t.Parallel()
	m := New()
	m.Request("app", 200, time.Millisecond, true)
	m.Request("app", 0, 0, false)
	for series := range testkit.Scrape(t, m.Handler()) {
		if !strings.HasPrefix(series, "previewgate_requests_total{") {
			continue
		}
		if series != `previewgate_requests_total{code="2xx",template="app"}` &&
			series != `previewgate_requests_total{code="other",template="app"}` {
			t.Errorf("unexpected series %s", series)
		}
	}
}

// TestLabelValues: reasons given as words become snake_case label values
// (#16: auth failures were labelled "wrong sandbox", "origin not allowed").
func TestLabelValues(t *testing.T) {
	t.Parallel()
	m := New()
	m.AuthFailed("wrong sandbox")
	m.AuthFailed("origin not allowed")
	m.AuthFailed("Not yet valid!")
	m.Rejected("websockets_ip")
	m.CertEvent("cert_obtained")
	got := testkit.Scrape(t, m.Handler())
	for _, s := range []string{
		`previewgate_auth_failures_total{reason="wrong_sandbox"}`,
		`previewgate_auth_failures_total{reason="origin_not_allowed"}`,
		`previewgate_auth_failures_total{reason="not_yet_valid"}`,
		`previewgate_limit_rejections_total{reason="websockets_ip"}`,
		`previewgate_certificate_events_total{event="cert_obtained"}`,
	} {
		if got[s] != 1 {
			t.Errorf("%s: got %v, want 1", s, got[s])
		}
	}
	for series := range got {
		if strings.Contains(series, " ") {
			t.Errorf("label value with a space: %s", series)
		}
	}
	for in, want := range map[string]string{"": "other", "  ": "other", "a  b": "a_b", " x ": "x", "ok": "ok"} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
}
