package gateway

import (
	"net/http/httptest"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/wire"
)

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
				if herr := l.allow(w, r, &decision{t: tb, rt: rt, tpl: tpl, sub: ""}, new(wire.Addrs)); herr != nil {
					rejected++
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			n := l.ip.Len()
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
