package gateway

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/wire"
)

// Rejection reasons passed to limiter.onReject (and used as metric labels).
const (
	rejectIP                = "ip"
	rejectSandbox           = "sandbox"
	rejectSubject           = "subject"
	rejectWebSocketsSandbox = "websockets_sandbox"
	rejectWebSocketsIP      = "websockets_ip"
	rejectBody              = "body"
	rejectExchangesIP       = "exchanges_ip"
	rejectExchanges         = "exchanges"
)

// defaultLimiterEntries bounds each bucket LRU when the config says nothing
// (config.ApplyDefaults normally fills LimiterEntries).
const defaultLimiterEntries = 100_000

// limiter holds rate-limit and connection-count state. It lives as long as
// the Gateway (state survives config reloads); the limits themselves are
// read from the table of each request.
//
// Token buckets live in bounded LRUs (Limits.LimiterEntries each) so a
// flood of distinct client addresses cannot grow memory without bound; an
// evicted key simply starts again with a full bucket. A bucket is keyed by
// its rate and burst as well as its subject, so a reloaded config with new
// numbers takes effect at once and per-template overrides get buckets of
// their own.
type limiter struct {
	// now is the clock; time.Now unless a test injects one.
	now func() time.Time
	// onReject, if set, is called once per rejected request with one of the
	// reject* reasons. It must be cheap and safe for concurrent use.
	onReject func(reason string)

	ip      buckets[netip.Addr]
	sandbox buckets[string]
	subject buckets[string]

	mu      sync.Mutex        // guards sockets
	sockets map[socketKey]int // open upgraded connections; zero entries are deleted
}

// socketKey counts sockets per sandbox (ip invalid) or per client (sandbox "").
type socketKey struct {
	sandbox string
	ip      netip.Addr
}

func newLimiter() *limiter {
	return &limiter{now: time.Now, sockets: make(map[socketKey]int)}
}

// buckets is one bounded set of token buckets.
type buckets[K comparable] struct {
	mu   sync.Mutex // guards lru and size
	lru  *simplelru.LRU[bucketKey[K], *rate.Limiter]
	size int
}

type bucketKey[K comparable] struct {
	id    K
	limit rate.Limit
	burst int
}

// get returns the bucket for k, creating it (full) if needed. size is the
// LRU bound from the current config; a change resizes the LRU.
func (b *buckets[K]) get(k bucketKey[K], size int) *rate.Limiter {
	if size <= 0 {
		size = defaultLimiterEntries
	}
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
	lim := rate.NewLimiter(k.limit, k.burst)
	b.lru.Add(k, lim)
	return lim
}

// len reports the number of buckets held.
func (b *buckets[K]) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lru == nil {
		return 0
	}
	return b.lru.Len()
}

// effectiveRates merges the template's overrides over the global rates.
func effectiveRates(cfg *config.Config, tpl *config.Template) (ip, sandbox, subject *config.Rate) {
	g := cfg.Limits.RateLimits
	ip, sandbox, subject = g.PerIP, g.PerSandbox, g.PerSubject
	if tpl != nil && tpl.Limits != nil {
		o := tpl.Limits
		if o.PerIP != nil {
			ip = o.PerIP
		}
		if o.PerSandbox != nil {
			sandbox = o.PerSandbox
		}
		if o.PerSubject != nil {
			subject = o.PerSubject
		}
	}
	return ip, sandbox, subject
}

// bucketParams turns a configured rate into limiter parameters; ok is false
// when the limit is off (nil, zero or not a positive number). A burst below
// one means one second's worth of requests, at least one.
func bucketParams(r *config.Rate) (limit rate.Limit, burst int, ok bool) {
	if r == nil || !(r.Rate > 0) {
		return 0, 0, false
	}
	burst = r.Burst
	if burst < 1 {
		burst = 1
		if r.Rate > 1 && r.Rate < math.MaxInt32 {
			burst = int(math.Ceil(r.Rate))
		}
	}
	return rate.Limit(r.Rate), burst, true
}

// allow applies the request-rate limits (per client IP, per sandbox, per
// token subject; sub may be empty) and returns a 429 error when one is hit.
// It also bounds the request body by the template's MaxBodyBytes.
//
// The limits are checked in that order and each consumes a token only when
// it passes, so a request refused for its IP costs the sandbox nothing: one
// abusive client cannot drain a sandbox's budget for everyone else.
func (l *limiter) allow(w http.ResponseWriter, r *http.Request, t *table, rt route, tpl *config.Template, sub string) *httpError {
	if tpl != nil && tpl.MaxBodyBytes > 0 {
		maxBody := int64(tpl.MaxBodyBytes)
		if r.ContentLength > maxBody {
			l.rejected(rejectBody)
			return &httpError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Msg: fmt.Sprintf("The request body is larger than this preview accepts (%d bytes).", maxBody)}
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
	}

	cfg := t.cfg
	ipRate, sbxRate, subRate := effectiveRates(cfg, tpl)
	size := cfg.Limits.LimiterEntries
	now := l.now()
	if limit, burst, ok := bucketParams(ipRate); ok {
		ip := wire.IPKey(wire.ClientIP(r, cfg.TrustedProxies))
		lim := l.ip.get(bucketKey[netip.Addr]{ip, limit, burst}, size)
		if !lim.AllowN(now, 1) {
			return l.limited(w, rejectIP, lim, now)
		}
	}
	if limit, burst, ok := bucketParams(subRate); ok && sub != "" {
		lim := l.subject.get(bucketKey[string]{sub, limit, burst}, size)
		if !lim.AllowN(now, 1) {
			return l.limited(w, rejectSubject, lim, now)
		}
	}
	if limit, burst, ok := bucketParams(sbxRate); ok && rt.sandbox != "" {
		lim := l.sandbox.get(bucketKey[string]{rt.sandbox, limit, burst}, size)
		if !lim.AllowN(now, 1) {
			return l.limited(w, rejectSandbox, lim, now)
		}
	}
	return nil
}

// limited builds the 429 for a bucket that said no, with Retry-After and the
// RateLimit-Policy / RateLimit fields of draft-ietf-httpapi-ratelimit-headers
// (structured-field form): the policy's quota is the burst, its window the
// time an empty bucket takes to refill; t is when one request fits again.
func (l *limiter) limited(w http.ResponseWriter, kind string, lim *rate.Limiter, now time.Time) *httpError {
	l.rejected(kind)
	limit, burst := float64(lim.Limit()), lim.Burst()
	tokens := lim.TokensAt(now)
	retry := 1
	if wait := (1 - tokens) / limit; wait > 1 {
		retry = int(min(math.Ceil(wait), math.MaxInt32))
	}
	window := int(min(max(math.Ceil(float64(burst)/limit), 1), math.MaxInt32))
	remaining := int(max(math.Floor(tokens), 0))
	h := w.Header()
	h.Set("RateLimit-Policy", `"`+kind+`";q=`+strconv.Itoa(burst)+`;w=`+strconv.Itoa(window))
	h.Set("RateLimit", `"`+kind+`";r=`+strconv.Itoa(remaining)+`;t=`+strconv.Itoa(retry))
	return &httpError{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Msg: limitedMsg[kind], RetryAfter: retry}
}

// limitedMsg names the limit that was hit, so users know whether to slow
// down themselves (ip, subject) or whether the sandbox is busy (sandbox).
var limitedMsg = map[string]string{
	rejectIP:      "Too many requests from your address (per-IP rate limit). Slow down and try again shortly.",
	rejectSubject: "Too many requests for your account (per-subject rate limit). Slow down and try again shortly.",
	rejectSandbox: "Too many requests for this sandbox (per-sandbox rate limit). Try again shortly.",
}

func (l *limiter) rejected(reason string) {
	if l.onReject != nil {
		l.onReject(reason)
	}
}

// openSocket counts an upgraded connection against the per-sandbox and
// per-IP caps; release must be called when it closes (calling it again is
// harmless). Counters at zero are deleted, so idle keys cost nothing.
func (l *limiter) openSocket(r *http.Request, t *table, sandbox string) (release func(), herr *httpError) {
	lim := &t.cfg.Limits
	ip := wire.IPKey(wire.ClientIP(r, t.cfg.TrustedProxies))
	sk, ik := socketKey{sandbox: sandbox}, socketKey{ip: ip}
	l.mu.Lock()
	switch {
	case sandbox != "" && lim.WebSocketsPerSandbox > 0 && l.sockets[sk] >= lim.WebSocketsPerSandbox:
		l.mu.Unlock()
		return nil, l.tooManySockets(rejectWebSocketsSandbox,
			"This sandbox has too many open connections. Close some tabs and try again.")
	case lim.WebSocketsPerIP > 0 && l.sockets[ik] >= lim.WebSocketsPerIP:
		l.mu.Unlock()
		return nil, l.tooManySockets(rejectWebSocketsIP,
			"Your address has too many open connections. Close some tabs and try again.")
	}
	if sandbox != "" {
		l.sockets[sk]++
	}
	l.sockets[ik]++
	l.mu.Unlock()

	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if sandbox != "" {
				l.decLocked(sk)
			}
			l.decLocked(ik)
		})
	}, nil
}

// decLocked drops one count for k, deleting it at zero. l.mu must be held.
func (l *limiter) decLocked(k socketKey) {
	if n := l.sockets[k] - 1; n > 0 {
		l.sockets[k] = n
	} else {
		delete(l.sockets, k)
	}
}

func (l *limiter) tooManySockets(reason, msg string) *httpError {
	l.rejected(reason)
	return &httpError{Status: http.StatusTooManyRequests, Code: "too_many_websockets",
		Msg: msg, RetryAfter: 5}
}

// openSockets reports the open upgraded connections for sandbox (if not
// empty) or for the client address ip.
func (l *limiter) openSockets(sandbox string, ip netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sandbox != "" {
		return l.sockets[socketKey{sandbox: sandbox}]
	}
	return l.sockets[socketKey{ip: wire.IPKey(ip)}]
}

// admitExchange counts a proxied exchange (a request, or a WebSocket for
// its whole life) against limits.connections_per_ip for its client and
// limits.max_connections in all (#13). The connection caps alone do not
// bound upstream descriptors: HTTP/2 carries many exchanges on one client
// connection, each holding an upstream connection while it runs. The client
// is the socket's peer, as for the connection caps.
func (g *Gateway) admitExchange(r *http.Request) (release func(), herr *httpError) {
	peer := netip.IPv4Unspecified()
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		peer = ap.Addr()
	}
	release, over := g.exchanges.Acquire(peer)
	switch over {
	case "":
		return release, nil
	case "connections_per_ip":
		g.limit.rejected(rejectExchangesIP)
		return nil, &httpError{Status: http.StatusTooManyRequests, Code: "too_many_requests", RetryAfter: 1,
			Msg: "Your address has too many requests in progress. Try again in a moment."}
	}
	g.limit.rejected(rejectExchanges)
	return nil, &httpError{Status: http.StatusServiceUnavailable, Code: "busy", RetryAfter: 1,
		Msg: "The preview service is busy. Try again in a moment."}
}
