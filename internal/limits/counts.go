package limits

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Counts counts open things (upgraded sockets) per key against caps. The
// zero value is ready.
type Counts[K comparable] struct {
	mu sync.Mutex // guards n
	n  map[K]int  // zero entries are deleted
}

// Cap is a key and the most open things it may have; Max <= 0: no cap.
type Cap[K comparable] struct {
	Key K
	Max int
}

// Acquire counts one against every key of caps if each is below its Max;
// else it counts nothing and returns the index of the first cap reached
// (full >= 0). release undoes the counts; calling it again is harmless.
func (c *Counts[K]) Acquire(caps ...Cap[K]) (release func(), full int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, cp := range caps {
		if cp.Max > 0 && c.n[cp.Key] >= cp.Max {
			return nil, i
		}
	}
	if c.n == nil {
		c.n = make(map[K]int)
	}
	for _, cp := range caps {
		c.n[cp.Key]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, cp := range caps {
				if n := c.n[cp.Key] - 1; n > 0 {
					c.n[cp.Key] = n
				} else {
					delete(c.n, cp.Key)
				}
			}
		})
	}, -1
}

// Count reports the open things of key.
func (c *Counts[K]) Count(key K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// Len reports how many keys have open things.
func (c *Counts[K]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.n)
}

// Window counts events per key in a sliding window (creates per subject
// per hour): the times of at most limit events of the last period, in a
// bounded LRU. The zero value is not ready: use NewWindow.
type Window struct {
	period time.Duration
	now    func() time.Time
	mu     sync.Mutex // guards lru and size
	lru    *simplelru.LRU[string, []time.Time]
	size   int
}

// NewWindow returns a window of period on the clock now.
func NewWindow(period time.Duration, now func() time.Time) *Window {
	return &Window{period: period, now: now}
}

// Take charges one event to key if fewer than limit happened in the last
// period; otherwise it charges nothing and reports when one more fits.
// entries bounds the keys kept (zero: DefaultEntries); a change of it
// starts every key over.
func (w *Window) Take(key string, limit, entries int) (retry time.Duration, ok bool) {
	if entries <= 0 {
		entries = DefaultEntries
	}
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lru == nil || w.size != entries {
		w.lru, _ = simplelru.NewLRU[string, []time.Time](entries, nil)
		w.size = entries
	}
	times, _ := w.lru.Get(key)
	cut := 0
	for cut < len(times) && !times[cut].After(now.Add(-w.period)) {
		cut++
	}
	times = times[cut:]
	if len(times) >= limit {
		w.lru.Add(key, times)
		return times[len(times)-limit].Add(w.period).Sub(now), false
	}
	w.lru.Add(key, append(times, now))
	return 0, true
}

// Recent remembers keys for a while, at most a fixed number of them (the
// least recently added go first). The zero value is not ready: use
// NewRecent.
type Recent struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex // guards lru
	lru *simplelru.LRU[string, time.Time]
}

// NewRecent returns a memory of at most size keys, each for ttl on the
// clock now.
func NewRecent(size int, ttl time.Duration, now func() time.Time) *Recent {
	lru, _ := simplelru.NewLRU[string, time.Time](max(size, 1), nil) // size > 0: no error
	return &Recent{ttl: ttl, now: now, lru: lru}
}

// Add remembers key for the ttl from now.
func (r *Recent) Add(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lru.Add(key, r.now().Add(r.ttl))
}

// Has reports whether key was added less than the ttl ago.
func (r *Recent) Has(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.lru.Get(key)
	return ok && r.now().Before(until)
}
