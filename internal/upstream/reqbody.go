package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// How a request body travels: invariant 8, as net/http's Transport sends
// one. Besides: a body held for 100 Continue goes out anyway when a final
// answer came first on a connection that stays open, and is dropped when
// the answer closes it; a failed write to the app (it stopped reading:
// WriteTimeout) ends the exchange at once unless its answer has come.

// ExpectContinueTimeout is how long a body waits for the app's 100
// Continue before it is sent anyway (net/http's Transport's setting here
// before).
const ExpectContinueTimeout = time.Second

// bodyWriter sends one request body.
type bodyWriter struct {
	c *Conn
	// The body and its framing, copied from the Request: the caller's
	// Request need not outlive the call (it stays on its stack).
	body    io.Reader
	length  int64
	trailer http.Header
	cont    chan bool // Expect100: true sends the body, false drops it; nil: send at once
	decided bool      // the reader told cont (the exchange's goroutine only)
	done    chan struct{}
	// Set before done is closed.
	err        error
	readFailed bool // err is the client's body's
	cut        bool // the writer closed the connection: its err ended the exchange
	// answered: the final head was read; a failed write no longer cuts
	// the connection the answer is read from.
	answered atomic.Bool
	// The body's first piece, read before the head (Request.readFirst):
	// its buffer, sent from first; nil if none was read.
	first    []byte
	firstN   int
	firstEOF bool
}

// writeFraming writes the body's framing fields for req: Content-Length
// or chunked coding and the trailers it declares. A request without a
// body declares a length of 0 where net/http's Transport does (POST, PUT,
// PATCH), so an app that waits for a body does not wait.
func writeFraming(w *bufio.Writer, req *Request) {
	switch {
	case req.Body == nil:
		if req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
			w.WriteString("Content-Length: 0\r\n")
		}
		return
	case req.ContentLength < 0 || len(req.Trailer) > 0:
		w.WriteString("Transfer-Encoding: chunked\r\n")
		var names []string
		for k := range req.Trailer {
			if trailerField(k) {
				names = append(names, k)
			}
		}
		if len(names) > 0 {
			w.WriteString("Trailer: " + strings.Join(names, ", ") + "\r\n")
		}
	default:
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10))
		w.WriteString("\r\n")
	}
}

// trailerField reports whether a client's trailer field k may be sent
// on: a valid name that is not framing (net/http's own refusals).
func trailerField(k string) bool {
	switch k {
	case "Content-Length", "Transfer-Encoding", "Trailer", "Host":
		return false
	}
	return httpguts.ValidHeaderFieldName(k)
}

// startBody starts sending req's body on c.
func startBody(c *Conn, req *Request) *bodyWriter {
	bw := &bodyWriter{c: c, body: req.Body, length: req.ContentLength, trailer: req.Trailer, done: make(chan struct{})}
	if req.firstRead {
		bw.first, bw.firstN, bw.firstEOF = req.first, req.firstN, req.firstEOF
		req.first, req.firstRead = nil, false // the buffer is the writer's now
	}
	if req.Expect100 {
		bw.cont = make(chan bool, 1)
	}
	go bw.run()
	return bw
}

// interim wraps the caller's interim hook: a 100 Continue lets the body
// go (and is passed on, as ReverseProxy passed it).
func (bw *bodyWriter) interim(next func(*Response)) func(*Response) {
	if bw.cont == nil {
		return next
	}
	return func(r *Response) {
		if r.Status == http.StatusContinue {
			bw.decide(true)
		}
		if next != nil {
			next(r)
		}
	}
}

// decide tells a body held for 100 Continue whether to go.
func (bw *bodyWriter) decide(send bool) {
	if bw.cont != nil && !bw.decided {
		bw.decided = true
		bw.cont <- send
	}
}

// end stops the body, if it still goes out after a short wait (the
// connection closes), and waits for it; it returns nil when the body went
// out whole. The wait is for the usual case: an app that read the whole
// body and answered, whose last body write is just returning.
func (bw *bodyWriter) end(c *Conn) error {
	bw.decide(false)
	select {
	case <-bw.done:
		return bw.err
	default:
	}
	t := time.NewTimer(bodyEndWait)
	select {
	case <-bw.done:
	case <-t.C:
		c.Net.Close()
		<-bw.done
	}
	t.Stop()
	return bw.err
}

// bodyEndWait is how long a response's end waits for its request body to
// finish going out before it cuts it (net/http's Transport waits as long
// before it gives up reusing the connection).
const bodyEndWait = 50 * time.Millisecond

var errBodyHeld = errors.New("request body not sent: the app answered and closed before its 100 Continue")

func (bw *bodyWriter) run() {
	defer close(bw.done)
	if bw.cont != nil {
		t := time.NewTimer(ExpectContinueTimeout)
		select {
		case send := <-bw.cont:
			if !send {
				bw.err = errBodyHeld
			}
		case <-t.C:
		}
		t.Stop()
		if bw.err != nil {
			if bw.first != nil {
				bodyBuffers.Put(bw.first)
			}
			return
		}
	}
	buf := bw.first
	if buf == nil {
		buf = bodyBuffers.Get()
	}
	bw.err = bw.send(buf)
	bodyBuffers.Put(buf)
	if bw.err != nil && (bw.readFailed || !bw.answered.Load()) {
		bw.cut = true
		bw.c.Net.Close() // ends the exchange's read: the error is returned first
	}
}

var bodyBuffers = NewBufferPool()

// send sends the body as each read of it came: exactly length bytes, or
// chunks then the trailers. buf holds the first piece when one was read
// before the head (bw.first).
func (bw *bodyWriter) send(buf []byte) error {
	w, left := bw.c.W, bw.length
	chunked := left < 0 || len(bw.trailer) > 0
	first := bw.first != nil
	for chunked || left > 0 {
		var n int
		var err error
		if first {
			first, n = false, bw.firstN
			if bw.firstEOF {
				err = io.EOF
			}
		} else {
			p := buf
			if !chunked {
				p = buf[:min(int64(len(buf)), left)]
			}
			n, err = bw.body.Read(p)
		}
		if err != nil && err != io.EOF {
			bw.readFailed = true
			return fmt.Errorf("%w: %w", ErrRequestBody, err)
		}
		if n > 0 {
			if chunked {
				w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(n), 16))
				w.WriteString("\r\n")
			}
			w.Write(buf[:n])
			if chunked {
				w.WriteString("\r\n")
			}
			if werr := w.Flush(); werr != nil {
				return fmt.Errorf("send request body: %w", werr)
			}
			left -= int64(n)
		}
		if err == io.EOF && !chunked && left > 0 {
			bw.readFailed = true
			return fmt.Errorf("%w: %w", ErrRequestBody, io.ErrUnexpectedEOF)
		}
		if err == io.EOF {
			break
		}
	}
	if !chunked {
		return nil
	}
	w.WriteString("0\r\n")
	for k, vv := range bw.trailer {
		for _, v := range vv {
			if trailerField(k) && httpguts.ValidHeaderFieldValue(v) {
				w.WriteString(k)
				w.WriteString(": ")
				w.WriteString(v)
				w.WriteString("\r\n")
			}
		}
	}
	w.WriteString("\r\n")
	if err := w.Flush(); err != nil {
		return fmt.Errorf("send request body: %w", err)
	}
	return nil
}
