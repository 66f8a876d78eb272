package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// The lean HTTP/1.1 loop (#9). It serves only requests it understands
// completely — GET, HEAD or OPTIONS, HTTP/1.1, origin-form target, one
// valid Host, no body or body framing, no upgrade, no Expect, no
// Connection options but keep-alive/close, not an event stream — for a
// host the handler says it proxies straight to a running sandbox.
// Anything else, including anything malformed, is handed to net/http
// unanswered, with every byte read so far, so net/http's checks and error
// answers apply there.

const (
	h1BufSize  = 4 << 10  // read buffer per connection
	h1MaxHead  = 16 << 10 // longer heads go to net/http
	h1MaxLines = 100      // more header lines go to net/http
)

// h1conn is one connection served by the lean loop.
type h1conn struct {
	s        *Server
	conn     net.Conn
	remote   string
	tlsState *tls.ConnectionState
	ctx      context.Context // requests' context; cancelled when the connection ends
	cancel   context.CancelFunc
	buf      []byte // read buffer; buf[start:end] is unconsumed
	start    int
	end      int
	bw       *bufio.Writer
	pending  []byte   // the writers' hold-back buffer, reused
	hint     leanHint // what the handler's leanRequest found for the current request
	idle     atomic.Bool

	// A request running longer than watchAfter gets a goroutine that
	// notices its client leaving (net/http notices at once, with a read
	// per request; that is what the lean loop saves).
	reqStart  atomic.Int64  // Unix nanoseconds the running request started; 0 between requests
	wmu       sync.Mutex    // guards watchDone
	watchDone chan struct{} // the watcher's; nil when none runs
	// deadline is the read deadline set last; headDeadline says it is the
	// header timeout, not the idle one.
	deadline     time.Time
	headDeadline bool
	lines        [h1MaxLines]span // header line offsets, reused
}

// span locates a header line's name and value in the head (h1MaxHead
// fits in uint16).
type span struct{ name, value [2]uint16 }

func newH1conn(s *Server, c net.Conn) *h1conn {
	hc := &h1conn{s: s, conn: c, remote: c.RemoteAddr().String(), buf: make([]byte, h1BufSize),
		bw: bufio.NewWriterSize(c, 4<<10)}
	hc.ctx, hc.cancel = context.WithCancel(context.WithValue(context.Background(), leanHintKey{}, &hc.hint))
	if tc, ok := c.(*tls.Conn); ok {
		st := tc.ConnectionState()
		hc.tlsState = &st
	}
	return hc
}

// closeIfIdle closes the connection when it waits for a next request
// (Shutdown); a request being read or answered finishes first.
func (c *h1conn) closeIfIdle() {
	if c.idle.Load() {
		c.conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// serve runs requests until the connection ends or is handed over.
func (c *h1conn) serve() {
	handedOver := false
	defer func() {
		c.cancel()
		if !handedOver {
			c.conn.Close()
		}
	}()
	for {
		req, ok := c.readRequest()
		if !ok {
			return
		}
		if req == nil {
			handedOver = true
			c.s.handOver(c.conn, c.buf[c.start:c.end])
			return
		}
		if !c.handle(req) || c.s.closing.Load() {
			return
		}
	}
}

// readRequest reads the next request head. It returns the request to serve
// lean, (nil, true) to hand the connection over, or (nil, false) when the
// connection is done (closed, timed out, shutting down).
func (c *h1conn) readRequest() (*http.Request, bool) {
	srv := c.s.HTTP
	if c.start == c.end {
		c.start, c.end = 0, 0
	}
	headDeadline := false
	for {
		if c.end > c.start {
			n, req, fits := c.parse(c.buf[c.start:c.end])
			if n > 0 {
				if req == nil {
					return nil, true
				}
				c.start += n
				return req, true
			}
			if !fits {
				return nil, true
			}
		}
		// Need more bytes. Make room, growing up to h1MaxHead.
		if c.start > 0 {
			c.end = copy(c.buf, c.buf[c.start:c.end])
			c.start = 0
		}
		if c.end == len(c.buf) {
			if len(c.buf) >= h1MaxHead || len(c.buf) >= max(srv.MaxHeaderBytes, h1BufSize) {
				return nil, true // net/http enforces its own limit (431)
			}
			nb := make([]byte, 2*len(c.buf))
			copy(nb, c.buf[:c.end])
			c.buf = nb
		}
		if c.end == 0 {
			// Between requests: the idle timeout applies, and Shutdown may
			// close us.
			c.idle.Store(true)
			if c.s.closing.Load() {
				return nil, false
			}
			c.setDeadline(keepAliveTimeout(srv), false)
		} else if !headDeadline {
			headDeadline = true
			c.setDeadline(srv.ReadHeaderTimeout, true)
		}
		n, err := c.conn.Read(c.buf[c.end:])
		c.idle.Store(false)
		c.end += n
		if err != nil {
			return nil, false // closed, timed out, or cut short mid-head
		}
	}
}

// setDeadline sets the read deadline d from now (none for d <= 0). Moving
// an idle deadline costs a timer update per request, so it moves only
// when it has drifted by more than a sixteenth of d: a keep-alive
// connection may idle up to d, and at least 15/16 of d.
func (c *h1conn) setDeadline(d time.Duration, head bool) {
	if d <= 0 {
		if !c.deadline.IsZero() {
			c.conn.SetReadDeadline(time.Time{})
			c.deadline = time.Time{}
		}
		return
	}
	want := time.Now().Add(d)
	if head || c.headDeadline || c.deadline.IsZero() || want.Sub(c.deadline) > d/16 {
		c.conn.SetReadDeadline(want)
		c.deadline, c.headDeadline = want, head
	}
}

func keepAliveTimeout(s *http.Server) time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return s.ReadTimeout
}

// parse looks for one complete request head at the start of b. It returns
// the head's length (0 when incomplete) and the request, or a nil request
// for a head to hand over. fits is false when b can never complete a
// lean head (a line we would hand over anyway is already visible).
func (c *h1conn) parse(b []byte) (n int, req *http.Request, fits bool) {
	if len(b) > h1MaxHead {
		b = b[:h1MaxHead] // offsets fit in a span
	}
	// Request line.
	eol := indexCRLF(b)
	if eol < 0 {
		return 0, nil, len(b) < 2048 && !hasBareLF(b)
	}
	line := b[:eol]
	var method string
	switch {
	case hasPrefix(line, "GET "):
		method = http.MethodGet
	case hasPrefix(line, "HEAD "):
		method = http.MethodHead
	case hasPrefix(line, "OPTIONS "):
		method = http.MethodOptions
	default:
		return len(b), nil, false
	}
	rest := line[len(method)+1:]
	if len(rest) < len(" HTTP/1.1")+1 || string(rest[len(rest)-9:]) != " HTTP/1.1" || rest[0] != '/' {
		return len(b), nil, false
	}
	target := rest[:len(rest)-9]
	for _, ch := range target {
		if ch <= ' ' || ch >= 0x7f {
			return len(b), nil, false
		}
	}
	if hasPrefix(target, "/__previewgate/") {
		return len(b), nil, false // the gateway's own endpoints stream
	}
	// Header lines.
	pos := eol + 2
	nlines := 0
	host := -1
	closeConn := false
	for {
		rem := b[pos:]
		e := indexCRLF(rem)
		if e < 0 {
			return 0, nil, !hasBareLF(rem)
		}
		if e == 0 {
			pos += 2
			break
		}
		if nlines == h1MaxLines {
			return len(b), nil, false
		}
		l := rem[:e]
		colon := -1
		for i, ch := range l {
			if ch == ':' {
				colon = i
				break
			}
			if !tokenByte[ch] {
				return len(b), nil, false // obs-fold, space before colon, junk
			}
		}
		if colon <= 0 {
			return len(b), nil, false
		}
		vs, ve := colon+1, len(l)
		for vs < ve && (l[vs] == ' ' || l[vs] == '\t') {
			vs++
		}
		for ve > vs && (l[ve-1] == ' ' || l[ve-1] == '\t') {
			ve--
		}
		for _, ch := range l[vs:ve] {
			if (ch < ' ' && ch != '\t') || ch == 0x7f {
				return len(b), nil, false
			}
		}
		name, value := l[:colon], l[vs:ve]
		switch {
		case equalFold(name, "Host"):
			if host >= 0 || !validHost(value) {
				return len(b), nil, false
			}
			host = nlines
		case equalFold(name, "Content-Length"), equalFold(name, "Transfer-Encoding"),
			equalFold(name, "Upgrade"), equalFold(name, "Expect"), equalFold(name, "Trailer"):
			return len(b), nil, false
		case equalFold(name, "Connection"):
			var ok bool
			if closeConn, ok = connectionOptions(value, closeConn); !ok {
				return len(b), nil, false
			}
		case equalFold(name, "Accept"):
			if containsFold(value, "text/event-stream") {
				return len(b), nil, false // long-lived: net/http notices a client leaving
			}
		}
		c.lines[nlines] = span{name: [2]uint16{uint16(pos), uint16(pos + colon)},
			value: [2]uint16{uint16(pos + vs), uint16(pos + ve)}}
		nlines++
		pos += e + 2
	}
	if host < 0 {
		return len(b), nil, false
	}
	// One string holds the whole head; every field is a slice of it, so
	// the handler may keep any of them.
	head := string(b[:pos])
	hs := c.lines[host]
	hostStr := head[hs.value[0]:hs.value[1]]
	targetStr := head[len(method)+1 : eol-9]
	u, err := url.ParseRequestURI(targetStr)
	if err != nil {
		return pos, nil, true
	}
	h := make(http.Header, nlines)
	vals := make([]string, nlines)
	for i := range nlines {
		if i == host {
			continue // net/http moves Host to Request.Host
		}
		sp := c.lines[i]
		k := head[sp.name[0]:sp.name[1]]
		if !isCanonical(k) {
			k = http.CanonicalHeaderKey(k)
		}
		vals[i] = head[sp.value[0]:sp.value[1]]
		if old, ok := h[k]; ok {
			h[k] = append(old, vals[i])
		} else {
			h[k] = vals[i : i+1 : i+1]
		}
	}
	r := &http.Request{
		Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, Host: hostStr, Close: closeConn,
		RemoteAddr: c.remote, RequestURI: targetStr, TLS: c.tlsState,
	}
	if !c.s.lean.leanRequest(r, &c.hint) {
		return pos, nil, true
	}
	return pos, r.WithContext(c.ctx), true
}

// handle runs the handler for req and finishes the response. It reports
// whether the connection may serve another request.
func (c *h1conn) handle(req *http.Request) (keep bool) {
	c.s.leanN.Add(1)
	c.reqStart.Store(time.Now().UnixNano())
	w := newH1writer(c, req)
	defer c.endWatch()
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				c.s.log.Error("handler panicked", "host", req.Host, "path", req.URL.Path,
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			}
			keep = false // the client sees a cut response, never a wrong one
		}
		w.done()
	}()
	c.s.HTTP.Handler.ServeHTTP(w, req)
	if !w.finish() || c.ctx.Err() != nil {
		return false
	}
	return !w.closeAfter
}

// watchAfter is how long a request runs before its client is watched.
const watchAfter = time.Second

// watchIfSlow starts the client watcher when the running request has
// taken watchAfter; the server's sweep calls it.
func (c *h1conn) watchIfSlow(now time.Time) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	start := c.reqStart.Load()
	if start == 0 || c.watchDone != nil || now.UnixNano()-start < int64(watchAfter) {
		return
	}
	if c.end == len(c.buf) {
		return // no room to read into (a long pipelined head): not watched
	}
	// No deadline but endWatch's (the request head's may still be set);
	// cleared here, under wmu, so it cannot undo endWatch's.
	c.conn.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	c.watchDone = done
	go func() {
		defer close(done)
		// Whatever arrives (a pipelined request, TLS records) stays in the
		// buffer for the loop; endWatch's deadline ends the read.
		n, err := c.conn.Read(c.buf[c.end:])
		c.end += n
		if err != nil && !isTimeout(err) {
			c.cancel() // the client left: end the handler's context
		}
	}()
}

// endWatch marks the request done and stops its watcher, if any, before
// the loop reads from the connection again.
func (c *h1conn) endWatch() {
	c.wmu.Lock()
	c.reqStart.Store(0)
	done := c.watchDone
	c.watchDone = nil
	c.wmu.Unlock()
	if done != nil {
		c.conn.SetReadDeadline(time.Unix(1, 0))
		<-done
		c.deadline = time.Time{} // setDeadline sets it anew
	}
}

func indexCRLF(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\n' {
			return -1 // bare LF: not ours
		}
		if b[i] == '\r' {
			if b[i+1] == '\n' {
				return i
			}
			return -1
		}
	}
	return -1
}

func hasBareLF(b []byte) bool {
	for i, ch := range b {
		if ch == '\n' && (i == 0 || b[i-1] != '\r') {
			return true
		}
		if ch == '\r' && i+1 < len(b) && b[i+1] != '\n' {
			return true
		}
	}
	return false
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// equalFold compares an ASCII header name case-insensitively.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(ch byte) byte {
	if 'A' <= ch && ch <= 'Z' {
		return ch + 'a' - 'A'
	}
	return ch
}

func containsFold(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if equalFold(b[i:i+len(s)], s) {
			return true
		}
	}
	return false
}

// connectionOptions accepts Connection values made only of keep-alive and
// close; other options name hop-by-hop headers, which net/http handles.
func connectionOptions(v []byte, closeConn bool) (bool, bool) {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		tok := v[:i]
		for len(tok) > 0 && (tok[0] == ' ' || tok[0] == '\t') {
			tok = tok[1:]
		}
		for len(tok) > 0 && (tok[len(tok)-1] == ' ' || tok[len(tok)-1] == '\t') {
			tok = tok[:len(tok)-1]
		}
		switch {
		case equalFold(tok, "close"):
			closeConn = true
		case equalFold(tok, "keep-alive"), len(tok) == 0:
		default:
			return closeConn, false
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
	}
	return closeConn, true
}

// validHost accepts what a DNS name or IP literal with a port may contain;
// anything else goes to net/http, which knows the exact rules.
func validHost(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, ch := range v {
		switch {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
		case ch == '.', ch == '-', ch == ':', ch == '[', ch == ']', ch == '_':
		default:
			return false
		}
	}
	return true
}

// isCanonical reports whether k is already in http.CanonicalHeaderKey form.
func isCanonical(k string) bool {
	upper := true
	for i := 0; i < len(k); i++ {
		ch := k[i]
		if upper && 'a' <= ch && ch <= 'z' || !upper && 'A' <= ch && ch <= 'Z' {
			return false
		}
		upper = ch == '-'
	}
	return true
}

// dateNow caches the Date header line for the current second.
var dateNow atomic.Pointer[dateEntry]

type dateEntry struct {
	sec  int64
	line string // "Date: <IMF-fixdate>\r\n"
}

// dateLine returns the Date header line for now.
func dateLine(now time.Time) string {
	sec := now.Unix()
	if d := dateNow.Load(); d != nil && d.sec == sec {
		return d.line
	}
	d := &dateEntry{sec: sec, line: "Date: " + now.UTC().Format(http.TimeFormat) + "\r\n"}
	dateNow.Store(d)
	return d.line
}
