package h1server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/previewgate/previewgate/internal/wire"
)

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
	ctx      context.Context // requests' context; cancelled when the connection ends, its client leaves mid-request or the server closes
	cancel   context.CancelFunc
	buf      []byte // read buffer; buf[start:end] is unconsumed
	start    int
	end      int
	bw       *bufio.Writer
	pending  []byte // the writers' hold-back buffer, reused
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
	// headBy is when the connection's first request head is due
	// (ReadHeaderTimeout after accept); zero once one was read, or with
	// no header timeout.
	headBy time.Time
	lines  [h1MaxLines]span // header line offsets, reused
}

// span locates a header line's name and value in the head (h1MaxHead
// fits in uint16).
type span struct{ name, value [2]uint16 }

func newH1conn(s *Server, c net.Conn, headBy time.Time) *h1conn {
	hc := &h1conn{s: s, conn: c, remote: c.RemoteAddr().String(), buf: make([]byte, h1BufSize), headBy: headBy,
		bw: bufio.NewWriterSize(c, 4<<10)}
	hc.ctx, hc.cancel = context.WithCancel(context.Background())
	// An exchange under the requests' context aborts its upstream socket
	// through the connection's one hook, not a hook of its own (#25).
	hc.ctx = wire.WithAbort(hc.ctx)
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
			c.s.handOver(c.conn, c.buf[c.start:c.end], c.headBy)
			return
		}
		c.headBy = time.Time{}
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
			// close us. A new connection has no idle time: its first head
			// is due ReadHeaderTimeout after accept (#13).
			c.idle.Store(true)
			if c.s.closing.Load() {
				return nil, false
			}
			if !c.headBy.IsZero() {
				headDeadline = true
				c.conn.SetReadDeadline(c.headBy)
				c.deadline, c.headDeadline = c.headBy, true
			} else {
				c.setDeadline(keepAliveTimeout(srv), false)
			}
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
		if err != nil && !wire.IsTimeout(err) {
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

// dateNow caches dateLine for the current second.
var dateNow atomic.Pointer[dateEntry]

type dateEntry struct {
	sec  int64
	line string
}

// dateLine returns the line "Date: <IMF-fixdate>\r\n" for now.
func dateLine(now time.Time) string {
	sec := now.Unix()
	if d := dateNow.Load(); d != nil && d.sec == sec {
		return d.line
	}
	d := &dateEntry{sec: sec, line: "Date: " + now.UTC().Format(http.TimeFormat) + "\r\n"}
	dateNow.Store(d)
	return d.line
}
