package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/wire"
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
	return w, l.allow(w, r, &decision{t: t, rt: route{sandbox: sandbox, template: tpl}, tpl: tpl, sub: sub}, new(wire.Addrs))
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
			return l.allow(httptest.NewRecorder(), r, &decision{t: tb, rt: route{sandbox: sandbox}, tpl: tpl, sub: ""}, new(wire.Addrs))
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
			if herr := l.allow(httptest.NewRecorder(), r, &decision{t: tb, rt: route{sandbox: "l1"}, tpl: lax, sub: ""}, new(wire.Addrs)); herr != nil {
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
		if n := l.ip.Len(); n != 1 {
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
	open := func(remote, sandbox string) (func(), *httpError) {
		return l.openSocket(req(remote), tb, sandbox, new(wire.Addrs))
	}
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
	if n := l.sockets.Len(); n != 0 {
		t.Fatalf("got %d socket counters after all released, want 0 (entries removed at zero)", n)
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
			if herr := l.allow(w, r, &decision{t: tb, rt: rt, tpl: tpl, sub: "alice"}, new(wire.Addrs)); herr != nil {
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
				if herr := l.allow(w, r, &decision{t: tb, rt: rt, tpl: tpl, sub: sub}, new(wire.Addrs)); herr != nil {
					b.Fatal(herr)
				}
			}
		})
	})
}

// openSockets reports the open upgraded connections for sandbox (if not
// empty) or for the client address ip.
func (l *limiter) openSockets(sandbox string, ip netip.Addr) int {
	if sandbox != "" {
		return l.sockets.Count(socketKey{sandbox: sandbox})
	}
	return l.sockets.Count(socketKey{ip: wire.IPKey(ip)})
}
