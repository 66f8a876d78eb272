package limits

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

func TestBucketsKeyedAndBounded(t *testing.T) {
	t.Parallel()
	var b Buckets[string]
	now := time.Unix(1e9, 0)
	a := b.Get("a", 1, 1, 10)
	if !a.AllowN(now, 1) || a.AllowN(now, 1) {
		t.Fatalf("a new bucket of burst 1: want one request, then none")
	}
	if b.Get("a", 1, 1, 10) != a {
		t.Fatalf("got another bucket for the same key and numbers, want the same")
	}
	if got := b.Get("a", 1, 2, 10); got == a || !got.AllowN(now, 2) {
		t.Fatalf("new numbers: want a bucket of their own, full")
	}
	for i := range 20 {
		b.Get(fmt.Sprint(i), 1, 1, 10)
	}
	if n := b.Len(); n != 10 {
		t.Fatalf("got %d buckets, want the bound 10", n)
	}
	b.Get("x", 1, 1, 3) // a smaller size shrinks the set
	if n := b.Len(); n != 3 {
		t.Fatalf("got %d buckets after resizing to 3, want 3", n)
	}
	if b.Get("a", 1, 1, 3).AllowN(now, 1) != true {
		t.Fatalf("an evicted key: want a full bucket again")
	}
	var zero Buckets[int]
	zero.Get(1, 1, 1, 0)
	if zero.Len() != 1 || zero.size != DefaultEntries {
		t.Fatalf("size 0: got bound %d, want DefaultEntries", zero.size)
	}
}

func TestParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate      float64
		burst     int
		wantBurst int
		ok        bool
	}{
		{0, 5, 0, false},
		{-1, 5, 0, false},
		{2, 5, 5, true},
		{3, 0, 3, true},   // one second's worth
		{0.5, 0, 1, true}, // at least one
		{2.5, 0, 3, true},
		{1e12, 0, 1, true}, // beyond an int32: one
	} {
		limit, burst, ok := Params(tc.rate, tc.burst)
		if ok != tc.ok || burst != tc.wantBurst || ok && limit != rate.Limit(tc.rate) {
			t.Errorf("Params(%v, %d): got %v %d %v, want %v %d %v", tc.rate, tc.burst, limit, burst, ok, tc.rate, tc.wantBurst, tc.ok)
		}
	}
}

func TestAdvice(t *testing.T) {
	t.Parallel()
	now := time.Unix(1e9, 0)
	for _, tc := range []struct {
		limit                 rate.Limit
		burst, spend          int
		retry, window, remain int
	}{
		{1, 3, 3, 1, 3, 0},
		{0.5, 2, 2, 2, 4, 0},
		{0.1, 5, 5, 10, 50, 0},
		{100, 100, 100, 1, 1, 0},
		{1, 3, 1, 1, 3, 2},
	} {
		lim := rate.NewLimiter(tc.limit, tc.burst)
		lim.AllowN(now, tc.spend)
		retry, window, remain := Advice(lim, now)
		if retry != tc.retry || window != tc.window || remain != tc.remain {
			t.Errorf("rate %v burst %d after %d: got retry %d window %d remaining %d, want %d %d %d",
				tc.limit, tc.burst, tc.spend, retry, window, remain, tc.retry, tc.window, tc.remain)
		}
	}
}

func TestCounts(t *testing.T) {
	t.Parallel()
	var c Counts[string]
	caps := func(sandbox, ip string) []Cap[string] { return []Cap[string]{{"s:" + sandbox, 2}, {"ip:" + ip, 3}} }
	a1, full := c.Acquire(caps("a", "1")...)
	if full != -1 {
		t.Fatalf("first: got full %d, want counted", full)
	}
	a2, _ := c.Acquire(caps("a", "2")...)
	if _, full := c.Acquire(caps("a", "3")...); full != 0 {
		t.Fatalf("third for a: got full %d, want 0 (the sandbox's cap)", full)
	}
	if c.Count("ip:3") != 0 {
		t.Fatalf("a refused acquire counted %d against the other key, want 0", c.Count("ip:3"))
	}
	b1, _ := c.Acquire(caps("b", "1")...)
	b2, _ := c.Acquire(caps("c", "1")...)
	if _, full := c.Acquire(caps("d", "1")...); full != 1 {
		t.Fatalf("fourth from ip 1: got full %d, want 1 (the ip's cap)", full)
	}
	a1()
	a1() // a second release is harmless
	if n := c.Count("s:a"); n != 1 {
		t.Fatalf("got %d on a after one release, want 1", n)
	}
	if _, full := c.Acquire(Cap[string]{"free", 0}, Cap[string]{"free", -1}); full != -1 {
		t.Fatalf("no cap: got full %d, want counted", full)
	}
	for _, release := range []func(){a2, b1, b2} {
		release()
	}
	if n := c.Len(); n != 1 { // "free" is still held
		t.Fatalf("got %d keys after the releases, want 1 (zero counts deleted)", n)
	}
}

// TestCountsConcurrent: concurrent acquires never pass a cap.
func TestCountsConcurrent(t *testing.T) {
	t.Parallel()
	var c Counts[int]
	var mu sync.Mutex
	var wg sync.WaitGroup
	held := 0
	for range 100 {
		wg.Go(func() {
			if _, full := c.Acquire(Cap[int]{1, 7}); full < 0 {
				mu.Lock()
				held++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if held != 7 || c.Count(1) != 7 {
		t.Fatalf("got %d acquired (count %d), want the cap 7", held, c.Count(1))
	}
}

func TestWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWindow(time.Hour, time.Now)
		for i := range 3 {
			if _, ok := w.Take("alice", 3, 10); !ok {
				t.Fatalf("event %d: refused", i)
			}
			time.Sleep(10 * time.Minute)
		}
		retry, ok := w.Take("alice", 3, 10)
		if ok {
			t.Fatalf("4th event: got ok, want refused")
		}
		// The first event was 30 minutes ago: it leaves the window in 30.
		if retry != 30*time.Minute {
			t.Errorf("got retry %v, want 30m", retry)
		}
		if _, ok := w.Take("bob", 3, 10); !ok {
			t.Errorf("another key: refused, want ok")
		}
		time.Sleep(30 * time.Minute)
		if _, ok := w.Take("alice", 3, 10); !ok {
			t.Errorf("after the window slid: refused, want ok")
		}
		if _, ok := w.Take("alice", 3, 10); ok {
			t.Errorf("got ok, want refused (two of the last hour's events remain)")
		}
		// Bounded: with 2 entries, a third key evicts the oldest, which
		// then starts over.
		w2 := NewWindow(time.Hour, time.Now)
		for _, s := range []string{"a", "b", "c"} {
			w2.Take(s, 1, 2)
		}
		if _, ok := w2.Take("a", 1, 2); !ok {
			t.Errorf("evicted key: refused, want a fresh window")
		}
		if _, ok := w2.Take("c", 1, 2); ok {
			t.Errorf("recent key: got ok, want refused")
		}
	})
}

func TestRecent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRecent(2, time.Hour, time.Now)
		r.Add("a")
		if !r.Has("a") || r.Has("b") {
			t.Fatalf("want a remembered and b not")
		}
		time.Sleep(time.Hour - time.Second)
		if !r.Has("a") {
			t.Fatalf("a forgotten before its hour")
		}
		time.Sleep(time.Second)
		if r.Has("a") {
			t.Fatalf("a remembered after its hour")
		}
		r.Add("a")
		r.Add("b")
		r.Add("c")
		if r.Has("a") || !r.Has("b") || !r.Has("c") {
			t.Fatalf("bound 2: want the oldest forgotten")
		}
	})
}
