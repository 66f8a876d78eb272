package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/previewgate/previewgate/internal/meter"
	"github.com/previewgate/previewgate/internal/outbound"
	"github.com/previewgate/previewgate/internal/pages"
	"github.com/previewgate/previewgate/internal/wire"
)

// ServeHTTP runs the request path, top to bottom: decide (host, access:
// decide.go) → admit (limits) → ensure (wake or create) → proxy. Every
// front end calls it: the lean HTTP/1.1 loop, net/http's HTTP/1.1 and
// HTTP/2.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := new(reqState)
	d := &st.d
	g.decide(r, d)
	id := g.takeRequestID(r, d.t.cfg.TrustedProxies, st)
	w.Header()["X-Request-Id"] = st.ids[1:2:2]
	sw := &st.sw
	sw.Start(w, r)
	proxied := g.serve(sw, r, d, st)
	status := sw.Final(r)
	took := time.Since(start)
	g.metrics.Request(d.label, status, took, proxied && !sw.Hijacked())
	g.record(d.rt.sandbox, st, r, sw, status, took, d.t)
	if d.t.cfg.Log.Access {
		g.logAccess(r, id, status, took, d.rt.sandbox, d.label)
	}
}

// logAccess writes the access log line. Out of ServeHTTP, whose frame
// would otherwise hold its nine attributes (~400 bytes) on every request's
// stack: an HTTP/2 stream's goroutine starts small, and every byte of the
// frames above the proxy is copied when it grows (#25).
//
//go:noinline
func (g *Gateway) logAccess(r *http.Request, id string, status int, took time.Duration, sandbox, label string) {
	g.log.LogAttrs(r.Context(), slog.LevelInfo, "request", slog.String("id", id),
		slog.String("method", r.Method), slog.String("host", r.Host), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Duration("took", took),
		slog.String("sandbox", sandbox), slog.String("template", label))
}

// serve carries out decision d for r and reports whether r reached the
// proxy.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, d *decision, st *reqState) (proxied bool) {
	if d.end != nil {
		g.carryOut(w, r, d)
		return false
	}
	cl, herr := g.admit(w, r, d, st)
	if herr != nil {
		g.fail(w, r, herr)
		cl.run() // what was admitted before the refusal
		return false
	}
	if d.rt.upstream != nil {
		st.t = target{url: d.rt.upstream, verifier: d.t.verifier, host: outbound.Host{Mode: outbound.Upstream}}
		g.proxy.serve(w, r, &st.t, cl)
		return true
	}
	return g.serveSandbox(w, r, d, st, cl)
}

// admit applies the limits to r and takes its admissions. It returns the
// releases owed when r's connection ends (for an upgrade, when its socket
// closes, after ServeHTTP returned), kept in st's room for the usual few
// (exchange admission, a hold or a socket's): no allocation of their
// own. On a refusal they are what was taken before it.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, d *decision, st *reqState) (closers, *httpError) {
	cl := closers(st.cl[:0])
	if herr := g.limit.allow(w, r, d, &st.addrs); herr != nil {
		return cl, herr
	}
	// From here the request is its sandbox's to count (traffic.go),
	// whatever answers it: the app, the waiting page, a failed start.
	st.counted = !isStatusRequest(r)
	if isUpgrade(r) {
		release, herr := g.limit.openSocket(r, d.t, d.rt.sandbox, &st.addrs)
		if herr != nil {
			return cl, herr
		}
		cl = append(cl, release)
	}
	release, herr := g.admitExchange(st.addrs.Peer(r))
	if herr != nil {
		return cl, herr
	}
	return append(cl, release), nil
}

// serveSandbox wakes or creates d's sandbox as its template says and
// proxies r to it, and reports whether r reached the proxy. cl is its to
// run, or to hand to the proxy with r. d.label becomes the template of
// the instance that answered.
func (g *Gateway) serveSandbox(w http.ResponseWriter, r *http.Request, d *decision, st *reqState, cl closers) (proxied bool) {
	handedOff := false
	defer func() {
		if !handedOff {
			cl.run()
		}
	}()
	tpl := d.tpl
	if tpl == nil {
		g.fail(w, r, &httpError{Status: http.StatusServiceUnavailable, Code: "no_template",
			Msg: "No template is configured to create this sandbox."})
		return false
	}
	if (isStatusRequest(r) || !d.ready) && g.waitingPage(w, r, d) {
		return false
	}
	var timing *meter.Timing
	var endWatch func() []meter.Span
	if !d.ready { // a request about to wait is timed
		endWatch = watchWake(d.h)
	}
	// Ensure notes activity (the handle's promise) before r is proxied.
	ep, err := d.h.Ensure(r.Context(), tpl, g.ensureOptions(r, d))
	if endWatch != nil {
		timing = &meter.Timing{Spans: endWatch(), ProxyStart: time.Now()}
	}
	if err != nil {
		if he := anonymousError(err); d.by != withToken && he != nil {
			g.fail(w, r, he)
			return false
		}
		he := ensureError(r.Context(), err)
		if he.Logs != nil && !g.holdsToken(r, d) {
			he.Logs = nil // a failed start's output: for token holders only
		}
		g.fail(w, r, he)
		return false
	}
	if own := d.t.cfg.Templates[ep.Template]; own != nil && own != tpl {
		// The manager's record was behind (another replica made it): the
		// instance's own template governs the proxying.
		tpl, d.label = own, own.Name
		if herr := portError(d.rt, tpl); herr != nil {
			g.fail(w, r, herr)
			return false
		}
	}
	// Activity: a long-lived request holds its sandbox awake while open
	// (Hold notes activity at both ends); any other notes it again when
	// its exchange ended (below: an upgrade is long-lived, so the proxy
	// is done with r when serve returns).
	long := isLongLived(r)
	pt := &st.t
	if long {
		cl = append(cl, d.h.Hold())
	}
	if d.by != withToken {
		// Its answer ends with the link or "public" that let it in. Every
		// answer, not only those the client calls streams: an SSE body
		// asked for without Accept: text/event-stream is one too.
		var release func()
		r, pt.stream, release = g.streams.open(r, d)
		cl = append(cl, release)
	}
	handedOff = true
	// Field by field into st's zero target, not a composite literal: the
	// literal's temporary would sit in this frame on every request's
	// stack (see logAccess).
	pt.sandbox, pt.port, pt.addr, pt.instance = d.rt.sandbox, d.rt.port, wire.PortAddr(ep.Addr, d.rt.port), ep.Instance
	pt.tpl, pt.verifier, pt.timing, pt.h, pt.by = tpl, d.t.verifier, timing, d.h, d.by
	pt.host = hostModeFor(tpl, r)
	g.proxy.serve(w, r, pt, cl)
	if pt.stream != nil && !st.sw.Answered() {
		// Its grant ended before the app answered (or the upgrade
		// switched): the proxy saw a cancelled request and wrote nothing.
		if he := g.streams.endedError(pt.stream); he != nil {
			g.fail(w, r, he)
		}
	}
	if !long {
		d.h.Touch()
	}
	return true
}

// isLongLived reports requests that may stay open for long: WebSocket
// upgrades and SSE streams. They keep their sandbox awake while open.
func isLongLived(r *http.Request) bool {
	return isUpgrade(r) || strings.Contains(headerValue(r.Header, "Accept"), "text/event-stream")
}

// isStatusRequest reports a request for the gateway's status stream.
func isStatusRequest(r *http.Request) bool {
	return r.URL.Path == pages.StatusPath || strings.HasPrefix(r.URL.Path, pages.StatusPath+"/")
}

// isUpgrade reports a protocol upgrade request (WebSocket).
func isUpgrade(r *http.Request) bool { return headerValue(r.Header, "Upgrade") != "" }

// newRequestIDPrefix returns a random per-process prefix for request ids.
func newRequestIDPrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// takeRequestID sets r's X-Request-Id, the one the app, the access log,
// the traffic log and the client's answer all carry, and returns it: the
// one a trusted proxy (trusted) sent, else one of the gateway's own. A
// client's own id is replaced: anybody could send one, and an id the
// operator searches logs by must not be chosen by whom it is about (a
// real id of another request sent again would mix two requests' lines).
func (g *Gateway) takeRequestID(r *http.Request, trusted []netip.Prefix, st *reqState) string {
	id := headerValue(r.Header, "X-Request-Id")
	if id == "" || len(id) > 128 || len(trusted) == 0 || !wire.Trusted(st.addrs.Peer(r), trusted) {
		id = g.requestID()
		st.ids[0] = id
		r.Header["X-Request-Id"] = st.ids[0:1:1]
	}
	st.ids[1] = id
	return id
}

// requestID returns a unique id for a request without X-Request-Id.
func (g *Gateway) requestID() string {
	var b [64]byte
	return string(strconv.AppendUint(append(append(b[:0], g.reqPfx...), '-'), g.reqSeq.Add(1), 36))
}

// reqState is what one request keeps on the heap, in one allocation
// instead of one each (#25): its status writer, its decision, the proxy's target, the
// first releases owed, and the X-Request-Id values of the request and the
// response (two slots, so neither header shares the other's slice).
type reqState struct {
	sw  meter.Writer
	d   decision
	t   target
	cl  [4]func()
	ids [2]string
	// counted: passed the access check and the limits, not the
	// gateway's own status stream (record).
	counted bool
	addrs   wire.Addrs
}

// headerValue is h.Get(key) for a key in canonical form (every caller
// passes a literal; TestHeaderValueKeys checks them): the same answer
// without canonicalizing the key on each call, several per request (#25).
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
