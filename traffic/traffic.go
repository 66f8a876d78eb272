// Package traffic keeps, per sandbox, the last requests one gateway
// replica served and counters of them, in bounded memory (#23).
//
// Bounds: at most Options.Sandboxes sandboxes are tracked (the least
// recently recorded is forgotten first, golang-lru), each with a ring of
// at most Options.Ring requests. A recorded request is a fixed-size entry
// (its path truncated to MaxPath bytes and copied in), so a full recorder
// holds about Sandboxes × Ring × 160 bytes whatever the clients send
// (BenchmarkMemory measures it) and retains no request's memory.
//
// What is recorded: time, method, path (never the query: a token or a
// share grant may travel there), status, duration, bytes in and out, the
// client's address. Never a header, a cookie or a token.
//
// Recording is the request path's: Record takes the LRU's lock for a map
// lookup and the sandbox's lock for a copy into its ring, never across
// I/O, and allocates only when a sandbox is first seen or its ring grows
// (BenchmarkRecord).
//
// Each replica records its own traffic only: with several replicas behind
// a load balancer, each answers for what it served and names itself
// (Options.Replica).
package traffic

import (
	"net/netip"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Defaults for Options' zero values.
const (
	DefaultSandboxes = 10000
	DefaultRing      = 32
	// MaxPath bounds the path kept per request; a longer one is cut at a
	// UTF-8 boundary and marked with "…".
	MaxPath = 80
)

// Options configure New. Zero values take the defaults.
type Options struct {
	Sandboxes int    // sandboxes tracked at most
	Ring      int    // requests kept per sandbox
	Replica   string // this replica's name, reported with every answer
}

// Request is one finished request as recorded. The admin API lists it
// as adminapi.Request.
type Request struct {
	Time     time.Time
	Method   string
	Path     string
	Status   int
	Duration time.Duration
	Millis   float64 // Duration in milliseconds
	BytesIn  int64
	BytesOut int64
	Client   string
}

// Counters are a sandbox's totals since this replica began tracking it.
type Counters struct {
	Requests int64
	BytesIn  int64
	BytesOut int64
	Errors   int64     // status 500 and above (and 499)
	Since    time.Time // when tracking began
	Last     time.Time
}

// entry is one request in a ring: fixed size, no pointers into the request.
type entry struct {
	at, dur, in, out int64
	client           netip.Addr
	status           int16
	mlen, plen       uint8
	method           [8]byte
	path             [MaxPath]byte
}

type sandbox struct {
	mu   sync.Mutex // guards everything below
	ring []entry    // grows to Recorder.ring, then wraps
	next int        // where the next entry goes once the ring is full
	c    Counters
}

// Recorder is safe for concurrent use.
type Recorder struct {
	ring    int
	replica string
	cache   *lru.Cache[string, *sandbox]
}

// New returns a Recorder with o's bounds.
func New(o Options) *Recorder {
	if o.Sandboxes <= 0 {
		o.Sandboxes = DefaultSandboxes
	}
	if o.Ring <= 0 {
		o.Ring = DefaultRing
	}
	c, _ := lru.New[string, *sandbox](o.Sandboxes) // errors only for a size <= 0
	return &Recorder{ring: o.Ring, replica: o.Replica, cache: c}
}

// Replica names the replica whose traffic this is.
func (r *Recorder) Replica() string { return r.replica }

// Record adds one finished request of sandbox id. path must be without
// its query (r.URL.Path). A nil Recorder records nothing.
func (r *Recorder) Record(id, method, path string, status int, took time.Duration, in, out int64, client netip.Addr) {
	if r == nil || id == "" {
		return
	}
	now := time.Now()
	sb, ok := r.cache.Get(id)
	if !ok {
		fresh := &sandbox{c: Counters{Since: now}}
		if prev, found, _ := r.cache.PeekOrAdd(id, fresh); found {
			sb = prev
		} else {
			sb = fresh
		}
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	var e *entry
	if len(sb.ring) < r.ring {
		sb.ring = append(sb.ring, entry{})
		e = &sb.ring[len(sb.ring)-1]
	} else {
		e = &sb.ring[sb.next]
		sb.next = (sb.next + 1) % len(sb.ring)
	}
	*e = entry{at: now.UnixNano(), dur: int64(took), in: in, out: out, client: client, status: int16(min(max(status, 0), 999))}
	e.mlen = uint8(copy(e.method[:], method))
	e.plen = uint8(copyPath(e.path[:], path))
	sb.c.Requests++
	sb.c.BytesIn += in
	sb.c.BytesOut += out
	if status >= 499 {
		sb.c.Errors++
	}
	sb.c.Last = now
}

// AddBytes adds a WebSocket's bytes after its 101 (in from the client,
// out to it) to sandbox id's counters, once the socket closed. The 101's
// own entry in the log keeps its head-only size. A sandbox no longer
// tracked is not tracked again for it.
func (r *Recorder) AddBytes(id string, in, out int64) {
	if r == nil || id == "" {
		return
	}
	sb, ok := r.cache.Peek(id)
	if !ok {
		return
	}
	sb.mu.Lock()
	sb.c.BytesIn += in
	sb.c.BytesOut += out
	sb.mu.Unlock()
}

// copyPath copies p into dst, cut at a UTF-8 boundary with "…" when too
// long, and returns the length written.
func copyPath(dst []byte, p string) int {
	if len(p) <= len(dst) {
		return copy(dst, p)
	}
	const ell = "…"
	n := len(dst) - len(ell)
	for n > 0 && p[n]&0xC0 == 0x80 {
		n-- // do not split a rune
	}
	copy(dst, p[:n])
	return n + copy(dst[n:], ell)
}

// Counters returns id's totals; false if this replica tracks none.
func (r *Recorder) Counters(id string) (Counters, bool) {
	if r == nil {
		return Counters{}, false
	}
	sb, ok := r.cache.Peek(id)
	if !ok {
		return Counters{}, false
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.c, true
}

// Last returns id's recorded requests, newest first, at most n (n <= 0:
// all kept).
func (r *Recorder) Last(id string, n int) []Request {
	if r == nil {
		return nil
	}
	sb, ok := r.cache.Peek(id)
	if !ok {
		return nil
	}
	sb.mu.Lock()
	ents := make([]entry, 0, len(sb.ring))
	// Oldest first: from next (the oldest once the ring wrapped).
	ents = append(ents, sb.ring[sb.next:]...)
	ents = append(ents, sb.ring[:sb.next]...)
	sb.mu.Unlock()
	if n <= 0 || n > len(ents) {
		n = len(ents)
	}
	out := make([]Request, 0, n)
	for i := len(ents) - 1; i >= len(ents)-n; i-- {
		out = append(out, ents[i].request())
	}
	return out
}

func (e *entry) request() Request {
	q := Request{Time: time.Unix(0, e.at).UTC(), Method: string(e.method[:e.mlen]), Path: string(e.path[:e.plen]),
		Status: int(e.status), Duration: time.Duration(e.dur), BytesIn: e.in, BytesOut: e.out}
	q.Millis = float64(q.Duration.Microseconds()) / 1000
	if e.client.IsValid() {
		q.Client = e.client.String()
	}
	return q
}

// Forget drops id's record (the sandbox was removed).
func (r *Recorder) Forget(id string) {
	if r != nil {
		r.cache.Remove(id)
	}
}
