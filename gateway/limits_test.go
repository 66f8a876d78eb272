package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/config"
)

// limitTable is a table for calling the limiter directly.
func limitTable(mod func(*config.Config)) *table {
	cfg := testConfig()
	if mod != nil {
		mod(cfg)
	}
	return &table{cfg: cfg}
}

// callAllow runs one request through l.allow as ServeHTTP would.
func callAllow(l *limiter, t *table, sandbox, sub, remote string, hdr ...string) (*httptest.ResponseRecorder, *httpError) {
	r := httptest.NewRequest("GET", "http://sandbox-"+sandbox+"."+testDomain+"/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	tpl := t.cfg.Template("")
	return w, l.allow(w, r, t, route{sandbox: sandbox, template: tpl}, tpl, sub)
}

// TestLimiterBurstThenRefill checks each limit inside a synctest bubble: the
// burst passes, the next request gets 429 with an exact Retry-After and
// RateLimit fields, and after waiting that long one more request passes.
func TestLimiterBurstThenRefill(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind  string
		rate  config.Rate
		set   func(*config.RateLimits, *config.Rate)
		retry int
	}{
		{"ip", config.Rate{Rate: 1, Burst: 3}, func(l *config.RateLimits, r *config.Rate) { l.PerIP = r }, 1},
		{"sandbox", config.Rate{Rate: 0.5, Burst: 2}, func(l *config.RateLimits, r *config.Rate) { l.PerSandbox = r }, 2},
		{"subject", config.Rate{Rate: 0.1, Burst: 5}, func(l *config.RateLimits, r *config.Rate) { l.PerSubject = r }, 10},
		{"fast ip", config.Rate{Rate: 100, Burst: 100}, func(l *config.RateLimits, r *config.Rate) { l.PerIP = r }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter()
				var rejects []string
				l.onReject = func(reason string) { rejects = append(rejects, reason) }
				tb := limitTable(func(c *config.Config) { tc.set(&c.Limits.RateLimits, &tc.rate) })
				kind := strings.TrimPrefix(tc.kind, "fast ")
				for i := range tc.rate.Burst {
					if _, herr := callAllow(l, tb, "abc", "alice", "203.0.113.1:1"); herr != nil {
						t.Fatalf("request %d of the burst: got %v, want allowed", i+1, herr)
					}
				}
				w, herr := callAllow(l, tb, "abc", "alice", "203.0.113.1:1")
				if herr == nil || herr.Status != 429 || herr.Code != "rate_limited" {
					t.Fatalf("request %d: got %v, want 429 rate_limited", tc.rate.Burst+1, herr)
				}
				if herr.RetryAfter != tc.retry {
					t.Errorf("got Retry-After %d, want %d", herr.RetryAfter, tc.retry)
				}
				if !strings.Contains(herr.Msg, "per-"+map[string]string{"ip": "IP"}[kind]) &&
					!strings.Contains(herr.Msg, "per-"+kind) {
					t.Errorf("got message %q, want it to name the %s limit", herr.Msg, kind)
				}
				window := max(int((float64(tc.rate.Burst)/tc.rate.Rate)+0.999999), 1)
				wantPolicy := fmt.Sprintf(`"%s";q=%d;w=%d`, kind, tc.rate.Burst, window)
				if got := w.Header().Get("RateLimit-Policy"); got != wantPolicy {
					t.Errorf("got RateLimit-Policy %q, want %q", got, wantPolicy)
				}
				wantRL := fmt.Sprintf(`"%s";r=0;t=%d`, kind, tc.retry)
				if got := w.Header().Get("RateLimit"); got != wantRL {
					t.Errorf("got RateLimit %q, want %q", got, wantRL)
				}
				if len(rejects) != 1 || rejects[0] != kind {
					t.Errorf("got rejections %v, want [%s]", rejects, kind)
				}

				time.Sleep(time.Duration(tc.retry)*time.Second - time.Millisecond)
				if _, herr := callAllow(l, tb, "abc", "alice", "203.0.113.1:1"); herr == nil && tc.retry > 1 {
					t.Fatalf("allowed just before Retry-After elapsed")
				}
				time.Sleep(time.Millisecond)
				if _, herr := callAllow(l, tb, "abc", "alice", "203.0.113.1:1"); herr != nil {
					t.Fatalf("after waiting Retry-After: got %v, want allowed", herr)
				}
			})
		})
	}
}

// TestLimiterKeys checks what each bucket is keyed by.
func TestLimiterKeys(t *testing.T) {
	t.Parallel()
	one := &config.Rate{Rate: 1, Burst: 1}
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, f)
		})
	}
	run("ip limit is per client", func(t *testing.T) {
		l, tb := newLimiter(), limitTable(func(c *config.Config) { c.Limits.PerIP = one })
		mustAllow(t, l, tb, "abc", "", "203.0.113.1:1")
		mustAllow(t, l, tb, "abc", "", "203.0.113.2:1")
		mustLimit(t, l, tb, "def", "", "203.0.113.1:2", "ip")
	})
	run("ipv6 clients share their /64", func(t *testing.T) {
		l, tb := newLimiter(), limitTable(func(c *config.Config) { c.Limits.PerIP = one })
		mustAllow(t, l, tb, "abc", "", "[2001:db8:1:2::1]:1")
		mustLimit(t, l, tb, "abc", "", "[2001:db8:1:2:ffff::9]:1", "ip")
		mustAllow(t, l, tb, "abc", "", "[2001:db8:1:3::1]:1")
	})
	run("sandbox limit is per sandbox", func(t *testing.T) {
		l, tb := newLimiter(), limitTable(func(c *config.Config) { c.Limits.PerSandbox = one })
		mustAllow(t, l, tb, "abc", "", "203.0.113.1:1")
		mustAllow(t, l, tb, "def", "", "203.0.113.1:1")
		mustLimit(t, l, tb, "abc", "", "203.0.113.2:1", "sandbox")
	})
	run("subject limit spans sandboxes", func(t *testing.T) {
		l, tb := newLimiter(), limitTable(func(c *config.Config) { c.Limits.PerSubject = one })
		mustAllow(t, l, tb, "abc", "alice", "203.0.113.1:1")
		mustAllow(t, l, tb, "abc", "bob", "203.0.113.1:1")
		mustLimit(t, l, tb, "def", "alice", "203.0.113.2:1", "subject")
		// Public routes have no subject: the limit does not apply.
		mustAllow(t, l, tb, "abc", "", "203.0.113.1:1")
		mustAllow(t, l, tb, "abc", "", "203.0.113.1:1")
	})
	run("refused for its ip costs the sandbox nothing", func(t *testing.T) {
		l := newLimiter()
		tb := limitTable(func(c *config.Config) {
			c.Limits.PerIP = one
			c.Limits.PerSandbox = &config.Rate{Rate: 1, Burst: 2}
		})
		mustAllow(t, l, tb, "abc", "", "203.0.113.1:1")
		for range 10 {
			mustLimit(t, l, tb, "abc", "", "203.0.113.1:1", "ip")
		}
		mustAllow(t, l, tb, "abc", "", "203.0.113.2:1")
		mustLimit(t, l, tb, "abc", "", "203.0.113.3:1", "sandbox")
	})
	run("zero rate is off", func(t *testing.T) {
		l := newLimiter()
		tb := limitTable(func(c *config.Config) { c.Limits.PerIP = &config.Rate{Rate: 0, Burst: 1} })
		for range 100 {
			mustAllow(t, l, tb, "abc", "", "203.0.113.1:1")
		}
	})
	run("zero burst is one second's worth", func(t *testing.T) {
		l := newLimiter()
		tb := limitTable(func(c *config.Config) { c.Limits.PerIP = &config.Rate{Rate: 3} })
		for range 3 {
			mustAllow(t, l, tb, "abc", "", "203.0.113.1:1")
		}
		mustLimit(t, l, tb, "abc", "", "203.0.113.1:1", "ip")
	})
}

// TestLimiterTemplateOverride checks that a template's rates replace the
// global ones field by field, and get buckets of their own.
func TestLimiterTemplateOverride(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter()
		tb := limitTable(func(c *config.Config) {
			c.Limits.PerIP = &config.Rate{Rate: 1, Burst: 3}
			c.Limits.PerSandbox = &config.Rate{Rate: 1, Burst: 1}
			c.Templates["strict"] = &config.Template{Name: "strict", MaxBodyBytes: 1 << 20,
				Limits: &config.RateLimits{PerIP: &config.Rate{Rate: 1, Burst: 1}}}
			c.Templates["lax"] = &config.Template{Name: "lax", MaxBodyBytes: 1 << 20,
				Limits: &config.RateLimits{PerSandbox: &config.Rate{Rate: 1, Burst: 100}}}
		})
		strict, lax := tb.cfg.Templates["strict"], tb.cfg.Templates["lax"]
		call := func(tpl *config.Template, sandbox string) *httpError {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "203.0.113.1:1"
			return l.allow(httptest.NewRecorder(), r, tb, route{sandbox: sandbox}, tpl, "")
		}
		if herr := call(strict, "s1"); herr != nil {
			t.Fatalf("strict first: got %v, want allowed", herr)
		}
		if herr := call(strict, "s2"); herr == nil || herr.Status != 429 {
			t.Fatalf("strict second: got %v, want 429 from the template's per-IP burst of 1", herr)
		}
		// Global per-IP bucket (burst 3) is separate from the template's.
		for i := range 3 {
			if herr := call(nil, fmt.Sprintf("g%d", i)); herr != nil {
				t.Fatalf("global %d: got %v, want allowed", i, herr)
			}
		}
		// lax overrides only per_sandbox; per_ip stays global (already spent).
		if herr := call(lax, "l1"); herr == nil || !strings.Contains(herr.Msg, "per-IP") {
			t.Fatalf("lax: got %v, want the global per-IP limit", herr)
		}
		// From another address, lax's own per-sandbox burst of 100 applies.
		for i := range 3 {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = fmt.Sprintf("203.0.113.%d:1", 10+i)
			if herr := l.allow(httptest.NewRecorder(), r, tb, route{sandbox: "l1"}, lax, ""); herr != nil {
				t.Fatalf("lax sandbox request %d: got %v, want allowed (burst 100)", i, herr)
			}
		}
	})
}

// TestLimiterReload checks that state survives a config swap, and that
// changed numbers take effect at once.
func TestLimiterReload(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter()
		old := limitTable(func(c *config.Config) { c.Limits.PerIP = &config.Rate{Rate: 1, Burst: 1} })
		mustAllow(t, l, old, "abc", "", "203.0.113.1:1")
		same := limitTable(func(c *config.Config) { c.Limits.PerIP = &config.Rate{Rate: 1, Burst: 1} })
		mustLimit(t, l, same, "abc", "", "203.0.113.1:1", "ip") // same numbers: same bucket
		bigger := limitTable(func(c *config.Config) { c.Limits.PerIP = &config.Rate{Rate: 1, Burst: 2} })
		mustAllow(t, l, bigger, "abc", "", "203.0.113.1:1")
		mustAllow(t, l, bigger, "abc", "", "203.0.113.1:1")
		mustLimit(t, l, bigger, "abc", "", "203.0.113.1:1", "ip")

		// A smaller LimiterEntries shrinks the LRU.
		small := limitTable(func(c *config.Config) {
			c.Limits.PerIP = &config.Rate{Rate: 1, Burst: 2}
			c.Limits.LimiterEntries = 1
		})
		mustAllow(t, l, small, "abc", "", "203.0.113.9:1")
		if n := l.ip.len(); n != 1 {
			t.Fatalf("got %d ip buckets after shrinking to 1, want 1", n)
		}
	})
}

func mustAllow(t *testing.T, l *limiter, tb *table, sandbox, sub, remote string) {
	t.Helper()
	if _, herr := callAllow(l, tb, sandbox, sub, remote); herr != nil {
		t.Fatalf("%s for %s from %s: got %v, want allowed", sandbox, sub, remote, herr)
	}
}

func mustLimit(t *testing.T, l *limiter, tb *table, sandbox, sub, remote, kind string) {
	t.Helper()
	w, herr := callAllow(l, tb, sandbox, sub, remote)
	if herr == nil || herr.Status != 429 {
		t.Fatalf("%s for %s from %s: got %v, want 429", sandbox, sub, remote, herr)
	}
	if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"`+kind+`"`) {
		t.Fatalf("got RateLimit %q, want the %s limit", got, kind)
	}
}

// TestLimiterFloodBounded sends 200,000 requests with distinct spoofed
// X-Forwarded-For values: through a trusted proxy each is a new client and
// the LRU bound keeps memory flat; from an untrusted peer the header is
// ignored and everything counts against the one peer.
func TestLimiterFloodBounded(t *testing.T) {
	const flood = 200_000
	tests := []struct {
		name    string
		entries int
		trusted bool
	}{
		{"trusted proxy, 1000 entries", 1000, true},
		{"trusted proxy, default 100000 entries", 0, true},
		{"untrusted peer", 1000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter()
			l.now = func() time.Time { return clockBase } // frozen: no refill during the flood
			tb := limitTable(func(c *config.Config) {
				c.Limits.PerIP = &config.Rate{Rate: 10, Burst: 20}
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
				if tc.entries > 0 {
					c.Limits.LimiterEntries = tc.entries
				}
			})
			entries := tb.cfg.Limits.LimiterEntries
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.1.1.1:4444"
			if !tc.trusted {
				r.RemoteAddr = "192.0.2.1:4444"
			}
			tpl := tb.cfg.Template("")
			rt := route{sandbox: "abc", template: tpl}
			w := httptest.NewRecorder()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rejected := 0
			var buf []byte
			for i := range flood {
				buf = netip.AddrFrom4([4]byte{byte(100 + i>>24), byte(i >> 16), byte(i >> 8), byte(i)}).AppendTo(buf[:0])
				r.Header["X-Forwarded-For"] = []string{"6.6.6.6, " + string(buf)}
				if herr := l.allow(w, r, tb, rt, tpl, ""); herr != nil {
					rejected++
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			n := l.ip.len()
			growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("%d requests, %d rejected, %d ip buckets (bound %d); heap before %d KiB, after %d KiB, growth %d KiB (%.0f B/bucket)",
				flood, rejected, n, entries, before.HeapAlloc>>10, after.HeapAlloc>>10, growth>>10,
				float64(growth)/float64(max(n, 1)))
			if n > entries {
				t.Fatalf("got %d ip buckets, want at most %d", n, entries)
			}
			// Each bucket costs a few hundred bytes; allow 1 KiB each plus
			// slack. Unbounded growth would be ~200,000 buckets.
			if limit := int64(entries)*1024 + 8<<20; growth > limit {
				t.Fatalf("heap grew %d bytes for %d buckets, want at most %d", growth, n, limit)
			}
			if tc.trusted {
				if rejected != 0 {
					t.Fatalf("got %d rejected, want 0: every request is a distinct client", rejected)
				}
				if n != entries {
					t.Fatalf("got %d ip buckets, want the LRU full at %d", n, entries)
				}
			} else {
				if n != 1 {
					t.Fatalf("got %d ip buckets, want 1: the untrusted peer's header is ignored", n)
				}
				if want := flood - 20; rejected != want {
					t.Fatalf("got %d rejected, want %d: all count against the peer", rejected, want)
				}
			}
		})
	}
}

func TestOpenSocketCounts(t *testing.T) {
	t.Parallel()
	l := newLimiter()
	var rejects []string
	l.onReject = func(reason string) { rejects = append(rejects, reason) }
	tb := limitTable(func(c *config.Config) {
		c.Limits.WebSocketsPerSandbox = 2
		c.Limits.WebSocketsPerIP = 3
	})
	req := func(remote string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		return r
	}
	open := func(remote, sandbox string) (func(), *httpError) { return l.openSocket(req(remote), tb, sandbox) }
	a1, herr := open("203.0.113.1:1", "abc")
	if herr != nil {
		t.Fatal(herr)
	}
	a2, _ := open("203.0.113.2:1", "abc")
	if _, herr := open("203.0.113.3:1", "abc"); herr == nil || herr.Status != 429 ||
		herr.Code != "too_many_websockets" || herr.RetryAfter <= 0 {
		t.Fatalf("third socket to abc: got %v, want 429 too_many_websockets with Retry-After", herr)
	}
	b1, _ := open("203.0.113.1:1", "def")
	b2, _ := open("203.0.113.1:1", "ghi")
	if _, herr := open("203.0.113.1:1", "jkl"); herr == nil || herr.Code != "too_many_websockets" {
		t.Fatalf("fourth socket from one ip: got %v, want 429", herr)
	}
	if want := []string{rejectWebSocketsSandbox, rejectWebSocketsIP}; fmt.Sprint(rejects) != fmt.Sprint(want) {
		t.Fatalf("got rejections %v, want %v", rejects, want)
	}
	a1()
	a1() // a second release is harmless
	if got := l.openSockets("abc", netip.Addr{}); got != 1 {
		t.Fatalf("got %d sockets on abc after one release, want 1", got)
	}
	c, herr := open("203.0.113.3:1", "abc")
	if herr != nil {
		t.Fatalf("after a release: got %v, want allowed", herr)
	}
	for _, release := range []func(){a2, b1, b2, c} {
		release()
	}
	l.mu.Lock()
	n := len(l.sockets)
	l.mu.Unlock()
	if n != 0 {
		t.Fatalf("got %d socket counters after all released, want 0 (entries removed at zero)", n)
	}
}

// fakeClock is a limiter clock for tests over real sockets, where synctest
// cannot run.
type fakeClock struct{ off atomic.Int64 }

var clockBase = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *fakeClock) now() time.Time          { return clockBase.Add(time.Duration(c.off.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.off.Add(int64(d)) }

func startLimitedGateway(t *testing.T, cfg *config.Config) (*fakeSandboxes, *httptest.Server, *fakeClock, *Gateway) {
	t.Helper()
	app := echoApp(t)
	sb := &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}
	g, srv := startGateway(t, cfg, sb)
	clk := &fakeClock{}
	g.limit.now = clk.now // before any request
	return sb, srv, clk, g
}

// TestRateLimitOverHTTP runs each limit through the real handler chain.
func TestRateLimitOverHTTP(t *testing.T) {
	t.Parallel()
	rate := &config.Rate{Rate: 0.5, Burst: 2}
	tests := []struct {
		kind  string
		set   func(*config.Limits)
		other string // a sandbox the limit does not cover, "" if it does
	}{
		{"ip", func(l *config.Limits) { l.PerIP = rate }, ""},
		{"sandbox", func(l *config.Limits) { l.PerSandbox = rate }, "def"},
		{"subject", func(l *config.Limits) { l.PerSubject = rate }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			tc.set(&cfg.Limits)
			sb, srv, clk, _ := startLimitedGateway(t, cfg)
			tok := mintFor(t, cfg, "*", time.Hour)
			host := "sandbox-abc." + testDomain
			for i := range 2 {
				if resp := request(t, srv, "GET", host, "/", tok); resp.StatusCode != 200 {
					t.Fatalf("request %d: got %d, want 200", i+1, resp.StatusCode)
				}
			}
			resp := request(t, srv, "GET", host, "/", tok)
			if resp.StatusCode != 429 {
				t.Fatalf("request 3: got %d, want 429", resp.StatusCode)
			}
			if got := resp.Header.Get("Retry-After"); got != "2" {
				t.Errorf("got Retry-After %q, want 2", got)
			}
			if got, want := resp.Header.Get("RateLimit-Policy"), `"`+tc.kind+`";q=2;w=4`; got != want {
				t.Errorf("got RateLimit-Policy %q, want %q", got, want)
			}
			if got, want := resp.Header.Get("RateLimit"), `"`+tc.kind+`";r=0;t=2`; got != want {
				t.Errorf("got RateLimit %q, want %q", got, want)
			}
			var body struct{ Error, Code string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Code != "rate_limited" {
				t.Errorf("got body %+v (%v), want code rate_limited", body, err)
			}
			if got := sb.ensures.Load(); got != 2 {
				t.Errorf("got %d Ensure calls, want 2: a limited request must not reach the sandbox", got)
			}
			otherHost := "sandbox-def." + testDomain
			if got := request(t, srv, "GET", otherHost, "/", tok).StatusCode; (got == 200) != (tc.other != "") {
				t.Errorf("other sandbox: got %d, want %s", got, map[bool]string{true: "200", false: "429"}[tc.other != ""])
			}
			clk.advance(2 * time.Second)
			if got := request(t, srv, "GET", host, "/", tok).StatusCode; got != 200 {
				t.Fatalf("after Retry-After: got %d, want 200", got)
			}
		})
	}
}

// TestRateLimitClientIPOverHTTP checks that X-Forwarded-For picks the bucket
// only when the peer (here loopback) is a trusted proxy.
func TestRateLimitClientIPOverHTTP(t *testing.T) {
	t.Parallel()
	for _, trusted := range []bool{true, false} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Limits.PerIP = &config.Rate{Rate: 1, Burst: 1}
			if trusted {
				cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
			}
			_, srv, _, _ := startLimitedGateway(t, cfg)
			tok := mintFor(t, cfg, "*", time.Hour)
			host := "sandbox-abc." + testDomain
			send := func(xff string) int {
				return request(t, srv, "GET", host, "/", tok, "X-Forwarded-For", xff).StatusCode
			}
			if got := send("198.51.100.1"); got != 200 {
				t.Fatalf("first client: got %d, want 200", got)
			}
			if got := send("198.51.100.1"); got != 429 {
				t.Fatalf("first client again: got %d, want 429", got)
			}
			want := 429 // the header is ignored: the same peer
			if trusted {
				want = 200 // a different client behind the proxy
			}
			if got := send("198.51.100.2"); got != want {
				t.Fatalf("second spoofed client: got %d, want %d", got, want)
			}
		})
	}
}

// TestTemplateOverrideOverHTTP uses a route whose template has its own
// per-IP rate.
func TestTemplateOverrideOverHTTP(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Limits.PerIP = &config.Rate{Rate: 1, Burst: 50}
	cfg.Templates["strict"] = &config.Template{Image: "testapp",
		Limits: &config.RateLimits{PerIP: &config.Rate{Rate: 1, Burst: 1}}}
	cfg.Routes = []config.Route{{Host: "strict.example", Sandbox: "strict", Template: "strict"}}
	cfg.ApplyDefaults()
	_, srv, _, _ := startLimitedGateway(t, cfg)
	tok := mintFor(t, cfg, "*", time.Hour)
	if got := request(t, srv, "GET", "strict.example", "/", tok).StatusCode; got != 200 {
		t.Fatalf("strict first: got %d, want 200", got)
	}
	resp := request(t, srv, "GET", "strict.example", "/", tok)
	if resp.StatusCode != 429 || resp.Header.Get("RateLimit-Policy") != `"ip";q=1;w=1` {
		t.Fatalf("strict second: got %d %q, want 429 with the template's policy", resp.StatusCode,
			resp.Header.Get("RateLimit-Policy"))
	}
	for i := range 3 {
		if got := request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok).StatusCode; got != 200 {
			t.Fatalf("default template request %d: got %d, want 200 (global burst 50)", i, got)
		}
	}
}

// TestWebSocketCapsOverHTTP opens real WebSockets through the gateway.
func TestWebSocketCapsOverHTTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		perSandbox, perIP  int
		first, second, hit string // sandboxes of the two open sockets and the refused one
	}{
		{"per sandbox", 2, 32, "abc", "abc", "abc"},
		{"per ip", 64, 2, "abc", "def", "ghi"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Limits.WebSocketsPerSandbox = tc.perSandbox
			cfg.Limits.WebSocketsPerIP = tc.perIP
			_, srv, _, g := startLimitedGateway(t, cfg)
			tok := mintFor(t, cfg, "*", time.Hour)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			dial := func(sandbox string) (*websocket.Conn, *http.Response, error) {
				host := "sandbox-" + sandbox + "." + testDomain
				return websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws",
					&websocket.DialOptions{Host: host,
						HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
			}
			c1, _, err := dial(tc.first)
			if err != nil {
				t.Fatalf("first socket: %v", err)
			}
			defer c1.CloseNow()
			c2, _, err := dial(tc.second)
			if err != nil {
				t.Fatalf("second socket: %v", err)
			}
			defer c2.CloseNow()
			_, resp, err := dial(tc.hit)
			if err == nil || resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("third socket: got %v (%v), want 429 with Retry-After", resp, err)
			}
			var body struct{ Code string }
			json.NewDecoder(resp.Body).Decode(&body)
			if body.Code != "too_many_websockets" {
				t.Fatalf("got code %q, want too_many_websockets", body.Code)
			}
			// Plain requests are not capped.
			if got := request(t, srv, "GET", "sandbox-"+tc.hit+"."+testDomain, "/", tok).StatusCode; got != 200 {
				t.Fatalf("plain request: got %d, want 200", got)
			}
			// Closing one frees its slot once the proxy has torn it down.
			c1.Close(websocket.StatusNormalClosure, "")
			open := func() int { return g.limit.openSockets(tc.first, netip.Addr{}) }
			if tc.first != tc.second {
				open = func() int { return g.limit.openSockets("", netip.MustParseAddr("127.0.0.1")) }
			}
			for open() != 1 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			c3, _, err := dial(tc.hit)
			if err != nil {
				t.Fatalf("after closing one: %v", err)
			}
			c3.CloseNow()
		})
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Templates["app"].MaxBodyBytes = 16
	sb, srv, _, _ := startLimitedGateway(t, cfg)
	tok := mintFor(t, cfg, "abc", time.Hour)
	post := func(body io.Reader) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/upload", body)
		req.Host = "sandbox-abc." + testDomain
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if got := post(strings.NewReader(strings.Repeat("x", 16))).StatusCode; got != 200 {
		t.Fatalf("16 bytes: got %d, want 200", got)
	}
	ensures := sb.ensures.Load()
	resp := post(strings.NewReader(strings.Repeat("x", 17)))
	var body struct{ Code string }
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 413 || body.Code != "body_too_large" {
		t.Fatalf("declared 17 bytes: got %d %q, want 413 body_too_large", resp.StatusCode, body.Code)
	}
	if sb.ensures.Load() != ensures {
		t.Fatalf("an oversized declared body reached Ensure")
	}
	// Without a declared length the body is cut while streaming: the app
	// never gets more than the limit.
	resp = post(io.MultiReader(strings.NewReader(strings.Repeat("x", 4096))))
	if resp.StatusCode == 200 {
		t.Fatalf("chunked 4096 bytes: got 200, want a failure")
	}
	t.Logf("chunked oversized body answered %d", resp.StatusCode)
}

// TestSlowloris runs the real server from NewServer: a client that sends
// its headers one byte at a time is cut at ReadHeaderTimeout while other
// clients keep being served.
func TestSlowloris(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Limits.ReadHeaderTimeout = config.Duration(time.Second)
	app := echoApp(t)
	g, err := New(cfg, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, Options{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg, g, testLogger(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); g.Close() })
	tok := mintFor(t, cfg, "abc", time.Hour)

	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	cut := make(chan string, 1)
	go func() {
		br := bufio.NewReader(slow)
		line, err := br.ReadString('\n')
		if err == nil {
			// Whatever the server answered, it must also hang up.
			if _, err = io.Copy(io.Discard, br); err == nil {
				err = io.EOF // closed by the server
			}
		}
		cut <- fmt.Sprintf("%q, then %v", line, err)
	}()

	// A normal client keeps getting answers while the slow one dribbles.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var served, failed atomic.Int32
	wg.Go(func() {
		c := &http.Client{Timeout: 10 * time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
			req.Host = "sandbox-abc." + testDomain
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := c.Do(req)
			if err != nil || resp.StatusCode != 200 {
				failed.Add(1)
			} else {
				served.Add(1)
			}
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	// The header never ends: "GET / ...\r\nX-Pad: aaaa..." one byte per 200ms.
	// The server must cut us long before 100 bytes (20s).
	msg := "GET / HTTP/1.1\r\nHost: sandbox-abc." + testDomain + "\r\nX-Pad: " + strings.Repeat("a", 100)
	var result string
	sent := 0
dribble:
	for sent < len(msg) {
		select {
		case result = <-cut:
			break dribble
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := slow.Write([]byte{msg[sent]}); err != nil {
			result = "write: " + err.Error()
			break
		}
		sent++
	}
	close(stop)
	wg.Wait()
	if result == "" {
		t.Fatalf("slow client sent all %d bytes without being cut", sent)
	}
	if strings.Contains(result, "HTTP/1.1 2") {
		t.Fatalf("slow client got a success: %s", result)
	}
	t.Logf("slow client cut after %d bytes: %s; meanwhile %d served, %d failed", sent, result, served.Load(), failed.Load())
	if served.Load() == 0 || failed.Load() != 0 {
		t.Fatalf("normal client: %d served, %d failed while the slow one was connected; want all served",
			served.Load(), failed.Load())
	}
}

// BenchmarkLimiterAllow is the hot path: one request through allow with
// all three rate limits on, behind a trusted proxy, with a body limit.
func BenchmarkLimiterAllow(b *testing.B) {
	huge := &config.Rate{Rate: 1e9, Burst: 1 << 30}
	tb := limitTable(func(c *config.Config) {
		c.Limits.PerIP, c.Limits.PerSandbox, c.Limits.PerSubject = huge, huge, huge
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	tpl := tb.cfg.Template("")
	rt := route{sandbox: "abc", template: tpl}
	newReq := func(i int) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.1:5555"
		r.Header.Set("X-Forwarded-For", "198.51.100."+strconv.Itoa(i%250)+", 10.0.0.2")
		return r
	}
	b.Run("serial", func(b *testing.B) {
		l := newLimiter()
		r, w := newReq(1), httptest.NewRecorder()
		b.ReportAllocs()
		for b.Loop() {
			if herr := l.allow(w, r, tb, rt, tpl, "alice"); herr != nil {
				b.Fatal(herr)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := newLimiter()
		var n atomic.Int32
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(n.Add(1))
			r, w := newReq(i), httptest.NewRecorder()
			sub := "user" + strconv.Itoa(i)
			for pb.Next() {
				if herr := l.allow(w, r, tb, rt, tpl, sub); herr != nil {
					b.Fatal(herr)
				}
			}
		})
	})
}
