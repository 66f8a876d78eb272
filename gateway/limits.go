package gateway

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/limits"
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

// limiter holds rate-limit and connection-count state, in bounded memory
// (internal/limits). It lives as long as the Gateway (state survives config
// reloads); the limits themselves are read from the table of each request.
// An evicted key starts again with a full bucket; a reloaded config with
// new numbers, or a template's override, gets buckets of its own.
type limiter struct {
	// now is the clock; time.Now unless a test injects one.
	now func() time.Time
	// onReject, if set, is called once per rejected request with one of the
	// reject* reasons. It must be cheap and safe for concurrent use.
	onReject func(reason string)

	ip      limits.Buckets[netip.Addr]
	sandbox limits.Buckets[string]
	subject limits.Buckets[string]
	sockets limits.Counts[socketKey] // open upgraded connections
}

// socketKey counts sockets per sandbox (ip invalid) or per client (sandbox "").
type socketKey struct {
	sandbox string
	ip      netip.Addr
}

func newLimiter() *limiter { return &limiter{now: time.Now} }

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

// bucketParams turns a configured rate into limiter parameters; ok is
// false when the limit is off (nil, zero or not a positive number).
func bucketParams(r *config.Rate) (limit rate.Limit, burst int, ok bool) {
	if r == nil {
		return 0, 0, false
	}
	return limits.Params(r.Rate, r.Burst)
}

// allow applies the request-rate limits (per client IP, per sandbox, per
// token subject, which may be empty: d's) and returns a 429 error when one is hit.
// It also bounds the request body by the template's MaxBodyBytes.
//
// The limits are checked in that order and each consumes a token only when
// it passes, so a request refused for its IP costs the sandbox nothing: one
// abusive client cannot drain a sandbox's budget for everyone else.
func (l *limiter) allow(w http.ResponseWriter, r *http.Request, d *decision, addrs *wire.Addrs) *httpError {
	t, tpl, sub := d.t, d.tpl, d.sub
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
		ip := wire.IPKey(addrs.Client(r, cfg.TrustedProxies))
		lim := l.ip.Get(ip, limit, burst, size)
		if !lim.AllowN(now, 1) {
			return l.limited(w, rejectIP, lim, now)
		}
	}
	if limit, burst, ok := bucketParams(subRate); ok && sub != "" {
		lim := l.subject.Get(sub, limit, burst, size)
		if !lim.AllowN(now, 1) {
			return l.limited(w, rejectSubject, lim, now)
		}
	}
	if limit, burst, ok := bucketParams(sbxRate); ok && d.rt.sandbox != "" {
		lim := l.sandbox.Get(d.rt.sandbox, limit, burst, size)
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
	retry, window, remaining := limits.Advice(lim, now)
	burst := lim.Burst()
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
func (l *limiter) openSocket(r *http.Request, t *table, sandbox string, addrs *wire.Addrs) (release func(), herr *httpError) {
	lim := &t.cfg.Limits
	ip := wire.IPKey(addrs.Client(r, t.cfg.TrustedProxies))
	caps := make([]limits.Cap[socketKey], 0, 2) // the sandbox's cap first
	if sandbox != "" {
		caps = append(caps, limits.Cap[socketKey]{Key: socketKey{sandbox: sandbox}, Max: lim.WebSocketsPerSandbox})
	}
	caps = append(caps, limits.Cap[socketKey]{Key: socketKey{ip: ip}, Max: lim.WebSocketsPerIP})
	release, full := l.sockets.Acquire(caps...)
	switch {
	case full < 0:
		return release, nil
	case caps[full].Key.sandbox != "":
		return nil, l.tooManySockets(rejectWebSocketsSandbox,
			"This sandbox has too many open connections. Close some tabs and try again.")
	}
	return nil, l.tooManySockets(rejectWebSocketsIP,
		"Your address has too many open connections. Close some tabs and try again.")
}

func (l *limiter) tooManySockets(reason, msg string) *httpError {
	l.rejected(reason)
	return &httpError{Status: http.StatusTooManyRequests, Code: "too_many_websockets",
		Msg: msg, RetryAfter: 5}
}

// admitExchange counts a proxied exchange (a request, or a WebSocket for
// its whole life) against limits.connections_per_ip for its client and
// limits.max_connections in all (#13). The connection caps alone do not
// bound upstream descriptors: HTTP/2 carries many exchanges on one client
// connection, each holding an upstream connection while it runs. The client
// is the socket's peer, as for the connection caps.
func (g *Gateway) admitExchange(peer netip.Addr) (release func(), herr *httpError) {
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
