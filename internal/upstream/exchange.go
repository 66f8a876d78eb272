package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/previewgate/previewgate/internal/wire"
)

// Request is one HTTP/1.1 request on a connection of the pool. Exchange
// writes its request line, its Host field and its body's framing; the
// caller's outbound policy writes the other fields (WriteFields), never
// Content-Length or Transfer-Encoding.
type Request struct {
	Instance string // the pool key: the container instance (invariant 1)
	Addr     string // "host:port" the connection is dialed to
	// TLS, when set, speaks TLS on the connection (a fixed https
	// upstream); its connections are pooled apart from plain ones.
	TLS    *tls.Config
	Method string
	Path   string // escaped; "" is "/"
	Query  string // raw, without '?'; "" for none
	// HostPrefix+Host is the Host field's value (two parts, so that a
	// caller need not build the string).
	HostPrefix, Host string
	// Body is the request body, nil for none. It is sent with
	// Content-Length when ContentLength (>= 0) says how long it is and no
	// Trailer is declared, else chunked, then Trailer's fields (their
	// values read once the body ended, as a net/http server fills a
	// request's Trailer). See reqbody.go for how it travels.
	Body          io.Reader
	ContentLength int64
	Trailer       http.Header
	// Expect100: the client asked "Expect: 100-continue" (the caller's
	// fields carry it on). The body waits for the app's 100 Continue, at
	// most ExpectContinueTimeout (reqbody.go).
	Expect100 bool
	// Fresh dials a new connection instead of taking an idle one.
	Fresh bool
	// Caller writes the header fields and takes the interim answers; nil:
	// no fields, interim answers skipped.
	Caller Caller
	// Confirm, when set, is asked about every new connection once it is
	// made, before anything is written to it (invariant 10); a reused one
	// is not asked again.
	Confirm Confirmer

	// The body's first piece, read before anything is sent (readFirst),
	// kept here so that an Exchange the caller repeats after a failed
	// dial sends it: a bodyBuffers buffer and how much of it was read.
	first     []byte
	firstN    int
	firstEOF  bool // the body ended with the first piece
	firstRead bool
}

// Confirmer confirms whom a new connection reached: an implementation asks
// whoever runs the peer whether addr still belongs to instance (a sandbox
// handle asks its runtime). nil: it does. Any error: the connection is
// closed unused and the exchange fails with that error wrapped. It must
// honor ctx.
type Confirmer interface {
	Confirm(ctx context.Context, instance, addr string) error
}

// ErrRequestBody marks a failed read of a request's body, the client's
// (too slow, too large, malformed, cut): the error wraps it too. Nothing
// the app sent caused it.
var ErrRequestBody = errors.New("request body")

// readFirst reads req's body until its first bytes or its end, before
// the head goes out: a body that fails at once (a chunked body whose
// first size line is malformed) ends the exchange before the app sees
// anything of the request, instead of a head the app would take for a
// request with an empty body. Not for a body held for 100 Continue: the
// app must see the head to send it.
func (req *Request) readFirst() error {
	buf := bodyBuffers.Get()
	p := buf
	if req.ContentLength >= 0 && len(req.Trailer) == 0 {
		p = buf[:min(int64(len(buf)), req.ContentLength)]
	}
	for range 100 {
		n, err := req.Body.Read(p)
		if err != nil && err != io.EOF {
			bodyBuffers.Put(buf)
			return fmt.Errorf("%w: %w", ErrRequestBody, err)
		}
		if n > 0 || err == io.EOF || len(p) == 0 {
			req.first, req.firstN, req.firstEOF, req.firstRead = buf, n, err == io.EOF, true
			return nil
		}
	}
	bodyBuffers.Put(buf)
	return fmt.Errorf("%w: %w", ErrRequestBody, io.ErrNoProgress)
}

// Caller is the caller's part of an exchange, an interface so that a
// per-request value already on the heap can be handed over without
// allocating closures.
type Caller interface {
	// WriteFields writes the header fields after Host, each
	// "Key: value\r\n" (not the blank line).
	WriteFields(w *bufio.Writer)
	// Interim gets each 1xx answer except 101, at most MaxInterim of them
	// (invariant 6); its Header is valid during the call only.
	Interim(*Response)
}

// ErrUnanswered marks a failed exchange of a bodiless request on a
// reused connection that received no byte of answer: the connection died
// while idle, and the request may be sent again on a fresh one (net/http's
// Transport retries such requests too). Whether to is the caller's
// policy. A request with a body never fails so: its bytes may have gone
// out, and nothing may send it again.
var ErrUnanswered = errors.New("kept-alive connection failed before any answer")

// ErrUnconfirmed marks an exchange whose new connection its Request's
// Confirm did not confirm (invariant 10); the Confirmer's error is wrapped
// beside it. Nothing was sent.
var ErrUnconfirmed = errors.New("new connection not confirmed")

// Exchange sends req on a connection of the pool and reads the final
// response head, while the body (if any) goes out beside it. Only the
// returned response's Body.Close (which Release calls when the caller did
// not) can return that connection to the pool (invariant 3).
//
// ctx bounds the whole exchange, bodies included: when it ends the
// connection's deadline is set in the past, and the connection is closed,
// not pooled. On error nothing is left open and the body is no longer
// read; a failure that may be sent again wraps ErrUnanswered, a failed
// dial is the dialer's error, and a failed read of req.Body (the client's
// body: too slow, too large, malformed, cut) wraps ErrRequestBody and that
// error, before any upstream failure it caused. Unless the body waits for
// 100 Continue, its first bytes are read before anything is sent, so a
// body that fails at once sends nothing.
func (p *Pool) Exchange(ctx context.Context, req *Request) (*Response, error) {
	if req.Body != nil && !req.Expect100 && !req.firstRead {
		if err := req.readFirst(); err != nil {
			return nil, err
		}
	}
	c, reused, err := p.get(ctx, req)
	if err != nil {
		return nil, err
	}
	w := watch(ctx, c)
	var bw *bodyWriter
	resp, err := c.writeHead(req)
	if err == nil {
		interim := req.interim()
		if req.Body != nil {
			bw = startBody(c, req)
			interim = bw.interim(interim)
		}
		resp, err = ReadFinal(c.R, req.Method, interim)
	}
	if err != nil {
		w.stop()
		c.Net.Close()
		if bw != nil {
			if berr := bw.end(c); bw.cut {
				return nil, berr
			}
		}
		if reused && bw == nil && !c.Answered() && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: %w", ErrUnanswered, err)
		}
		return nil, err
	}
	if bw != nil {
		bw.answered.Store(true)
		bw.decide(!resp.Close) // a body held for 100 Continue: sent if the connection stays
	}
	resp.conn, resp.watch, resp.body = c, w, bw
	return resp, nil
}

// ctxWatch ends a connection's exchange when its context ends: through
// the context's wire.Abort when it has one (the lean loop's: a lock, no
// allocation), else through a context.AfterFunc of its own.
type ctxWatch struct {
	abort *wire.Abort
	after func() bool
}

func watch(ctx context.Context, c *Conn) ctxWatch {
	if a := wire.AbortOf(ctx); a != nil && a.Set(c.Net) {
		return ctxWatch{abort: a}
	}
	return ctxWatch{after: context.AfterFunc(ctx, c.expire)}
}

// stop ends the watch; it reports false when the context ended first
// (the connection's deadline may have been moved: close it).
func (w ctxWatch) stop() bool {
	if w.abort != nil {
		return w.abort.Clear()
	}
	return w.after()
}

// writeHead writes req's head on c: the request line, Host, the caller's
// fields, then the body's framing. It returns no response: the signature
// only lets Exchange share its error path.
func (c *Conn) writeHead(req *Request) (*Response, error) {
	bw := c.W
	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	if req.Path == "" {
		bw.WriteByte('/')
	} else {
		bw.WriteString(req.Path)
	}
	if req.Query != "" {
		bw.WriteByte('?')
		bw.WriteString(req.Query)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(req.HostPrefix)
	bw.WriteString(req.Host)
	bw.WriteString("\r\n")
	if req.Caller != nil {
		req.Caller.WriteFields(bw)
	}
	writeFraming(bw, req)
	bw.WriteString("\r\n")
	return nil, bw.Flush()
}

// interim is the caller's hook for interim answers, or nil.
func (req *Request) interim() func(*Response) {
	if req.Caller == nil {
		return nil
	}
	return req.Caller.Interim
}

// Close ends the body's use of its connection (a response of Exchange;
// for others it does nothing): the connection goes back to the pool only
// as invariant 3 says (put checks that nothing more is buffered). A
// request body still going out is cut: the connection closes, and Close
// waits until its sending stopped. Close is idempotent.
func (b *Body) Close() error {
	resp := b.resp
	if resp == nil || resp.conn == nil {
		return nil
	}
	c, w, bw := resp.conn, resp.watch, resp.body
	resp.conn, resp.watch, resp.body = nil, ctxWatch{}, nil
	live := w.stop()
	sent := bw == nil || bw.end(c) == nil
	ended := b.kind == bodyNone || b.err == io.EOF
	if live && sent && ended && b.kind != bodyEOF && !resp.Close && resp.Status != http.StatusSwitchingProtocols {
		c.pool.put(c)
		return nil
	}
	return c.Net.Close()
}
