package traffic

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRingKeepsTheLastN(t *testing.T) {
	r := New(Options{Ring: 4, Replica: "a"})
	client := netip.MustParseAddr("192.0.2.7")
	for i := range 10 {
		r.Record("s1", "GET", fmt.Sprintf("/p%d", i), 200+i, time.Millisecond, int64(i), int64(10*i), client)
	}
	got := r.Last("s1", 0)
	if len(got) != 4 {
		t.Fatalf("got %d requests, want 4", len(got))
	}
	for i, q := range got {
		want := fmt.Sprintf("/p%d", 9-i)
		if q.Path != want || q.Status != 209-i || q.Client != "192.0.2.7" || q.Method != "GET" {
			t.Errorf("request %d: got %+v, want path %s status %d", i, q, want, 209-i)
		}
	}
	if two := r.Last("s1", 2); len(two) != 2 || two[0].Path != "/p9" {
		t.Errorf("Last(2): got %+v", two)
	}
	c, ok := r.Counters("s1")
	if !ok || c.Requests != 10 || c.BytesIn != 45 || c.BytesOut != 450 {
		t.Errorf("counters: got %+v, want 10 requests, 45 in, 450 out", c)
	}
	if _, ok := r.Counters("other"); ok {
		t.Error("counters of an unseen sandbox")
	}
}

func TestSandboxesBounded(t *testing.T) {
	r := New(Options{Sandboxes: 3, Ring: 2})
	for i := range 5 {
		r.Record(fmt.Sprintf("s%d", i), "GET", "/", 200, 0, 0, 0, netip.Addr{})
	}
	if r.Len() != 3 {
		t.Fatalf("got %d sandboxes tracked, want 3", r.Len())
	}
	if _, ok := r.Counters("s0"); ok {
		t.Error("the least recently recorded sandbox is still tracked")
	}
	if _, ok := r.Counters("s4"); !ok {
		t.Error("the latest sandbox is not tracked")
	}
}

func TestLongPathCutAtRune(t *testing.T) {
	r := New(Options{})
	long := "/" + strings.Repeat("é", 100)
	r.Record("s", "GET", long, 200, 0, 0, 0, netip.Addr{})
	p := r.Last("s", 1)[0].Path
	if len(p) > MaxPath || !utf8.ValidString(p) || !strings.HasSuffix(p, "…") || !strings.HasPrefix(long, strings.TrimSuffix(p, "…")) {
		t.Errorf("got %q (%d bytes), want a valid prefix of at most %d bytes ending in …", p, len(p), MaxPath)
	}
}

func TestConcurrentCountsAddUp(t *testing.T) {
	r := New(Options{Ring: 8})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				r.Record(fmt.Sprintf("s%d", g%3), "POST", "/x", 200, 0, 3, 5, netip.Addr{})
			}
		}()
	}
	wg.Wait()
	var total int64
	for i := range 3 {
		c, _ := r.Counters(fmt.Sprintf("s%d", i))
		total += c.Requests
		if c.BytesIn != 3*c.Requests || c.BytesOut != 5*c.Requests {
			t.Errorf("s%d: got %+v", i, c)
		}
	}
	if total != 8000 {
		t.Errorf("got %d requests, want 8000", total)
	}
}

func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.Record("s", "GET", "/", 200, 0, 0, 0, netip.Addr{})
	if r.Last("s", 1) != nil || r.Len() != 0 {
		t.Error("a nil recorder answered something")
	}
}

// BenchmarkRecord is the request path's cost once a sandbox's ring is full.
func BenchmarkRecord(b *testing.B) {
	r := New(Options{})
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("sandbox-%d", i)
		for range DefaultRing {
			r.Record(ids[i], "GET", "/", 200, 0, 0, 0, netip.Addr{})
		}
	}
	client := netip.MustParseAddr("2001:db8::1")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Record(ids[i%len(ids)], "GET", "/_next/static/chunks/app/page-0123456789abcdef.js", 200, 3*time.Millisecond, 0, 4096, client)
			i++
		}
	})
}

// BenchmarkMemory fills a recorder to its bounds (DefaultSandboxes
// sandboxes, each with a full ring of maximal paths) and reports the heap
// it holds.
func BenchmarkMemory(b *testing.B) {
	path := "/" + strings.Repeat("a", 200)
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := New(Options{})
		for i := range DefaultSandboxes + 500 { // more than the bound
			id := fmt.Sprintf("sandbox-%05d", i)
			for range DefaultRing + 3 {
				r.Record(id, "GET", path, 200, 0, 0, 0, netip.MustParseAddr("192.0.2.1"))
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if r.Len() != DefaultSandboxes {
			b.Fatalf("got %d sandboxes, want %d", r.Len(), DefaultSandboxes)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/DefaultSandboxes, "B/sandbox")
		runtime.KeepAlive(r)
	}
}

// Len is how many sandboxes are tracked now.
func (r *Recorder) Len() int {
	if r == nil {
		return 0
	}
	return r.cache.Len()
}
