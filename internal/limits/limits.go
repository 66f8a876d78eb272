// Package limits keeps per-key limit state in bounded memory: token buckets
// (x/time/rate) for request rates, counts of open things against caps,
// sliding windows of events, and keys remembered for a while. It decides no
// policy (which keys, which numbers, what a client is told): the gateway
// does (gateway/limits.go, lifecycle.go, certworth.go).
//
// Its promises, each tested in limits_test.go (and the gateway's
// limits_flood_test.go, which floods it with distinct clients):
//
//  1. Memory is bounded whatever the keys: buckets, windows and remembered
//     keys live in LRUs of the size the caller gives (an evicted key starts
//     again, with a full bucket or an empty window); a count at zero is
//     deleted, so idle keys cost nothing.
//  2. A bucket is found by its rate and burst as well as its key: new
//     numbers (a reloaded config, a per-template override) take effect at
//     once, in a bucket of their own.
//  3. A lock is held only across map and LRU operations, never across I/O.
//  4. Time is the caller's (a now argument or func), so tests run in
//     testing/synctest.
package limits

import (
	"math"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// DefaultEntries bounds an LRU whose size is given as zero or less (the
// config's defaults normally set one).
const DefaultEntries = 100_000

// Buckets is one bounded set of token buckets. The zero value is ready.
type Buckets[K comparable] struct {
	mu   sync.Mutex // guards lru and size
	lru  *simplelru.LRU[bucketKey[K], *rate.Limiter]
	size int
}

type bucketKey[K comparable] struct {
	id    K
	limit rate.Limit
	burst int
}

// Get returns the bucket for key at limit and burst, creating it (full) if
// needed. size bounds the set; a change of it resizes the LRU.
func (b *Buckets[K]) Get(key K, limit rate.Limit, burst, size int) *rate.Limiter {
	if size <= 0 {
		size = DefaultEntries
	}
	k := bucketKey[K]{key, limit, burst}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lru == nil {
		b.lru, _ = simplelru.NewLRU[bucketKey[K], *rate.Limiter](size, nil) // size > 0: no error
		b.size = size
	} else if b.size != size {
		b.lru.Resize(size)
		b.size = size
	}
	if lim, ok := b.lru.Get(k); ok {
		return lim
	}
	lim := rate.NewLimiter(limit, burst)
	b.lru.Add(k, lim)
	return lim
}

// Len reports the number of buckets held.
func (b *Buckets[K]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lru == nil {
		return 0
	}
	return b.lru.Len()
}

// Params turns a rate per second and a burst into bucket parameters; ok is
// false when the limit is off (not a positive number). A burst below one
// means one second's worth of requests, at least one.
func Params(perSecond float64, burst int) (limit rate.Limit, b int, ok bool) {
	if !(perSecond > 0) {
		return 0, 0, false
	}
	if burst < 1 {
		burst = 1
		if perSecond > 1 && perSecond < math.MaxInt32 {
			burst = int(math.Ceil(perSecond))
		}
	}
	return rate.Limit(perSecond), burst, true
}

// Advice is what a client refused by lim at now may be told, in whole
// seconds (draft-ietf-httpapi-ratelimit-headers): retry, when one request
// fits again (at least 1); window, the time an empty bucket takes to
// refill (the policy's window, its quota being the burst); remaining, the
// whole tokens left.
func Advice(lim *rate.Limiter, now time.Time) (retry, window, remaining int) {
	limit, burst := float64(lim.Limit()), lim.Burst()
	tokens := lim.TokensAt(now)
	retry = 1
	if wait := (1 - tokens) / limit; wait > 1 {
		retry = int(min(math.Ceil(wait), math.MaxInt32))
	}
	window = int(min(max(math.Ceil(float64(burst)/limit), 1), math.MaxInt32))
	remaining = int(max(math.Floor(tokens), 0))
	return retry, window, remaining
}
