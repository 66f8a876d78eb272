package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/previewgate/previewgate/internal/wire"
)

// Request is the head of one bodiless HTTP/1.1 request on the direct
// path. Exchange writes its request line and Host field; the caller's
// outbound policy writes the other fields (WriteFields).
type Request struct {
	Instance string // the pool key: the container instance (invariant 1)
	Addr     string // "ip:port" the connection is dialed to
	Method   string
	Path     string // escaped; "" is "/"
	Query    string // raw, without '?'; "" for none
	// HostPrefix+Host is the Host field's value (two parts, so that a
	// caller need not build the string).
	HostPrefix, Host string
	// Fresh dials a new connection instead of taking an idle one.
	Fresh bool
	// Caller writes the header fields and takes the interim answers; nil:
	// no fields, interim answers skipped.
	Caller Caller
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

// ErrUnanswered marks a failed exchange on a reused connection that
// received no byte of answer: the connection died while idle, and the
// request may be sent again on a fresh one (net/http's Transport retries
// such requests too). Whether to is the caller's policy.
var ErrUnanswered = errors.New("kept-alive connection failed before any answer")

// Exchange sends req on a connection of the pool and reads the final
// response head. Only the returned response's Body.Close (which Release
// calls when the caller did not) can return that connection to the pool,
// and it does so only when the body was read exactly to its end with no
// error, the response allows reuse and nothing more is buffered
// (invariant 3): no caller can pool a connection mid-body.
//
// ctx bounds the whole exchange, body included: when it ends the
// connection's deadline is set in the past, and the connection is closed,
// not pooled. On error nothing is left open; a failure that may be sent
// again wraps ErrUnanswered, a failed dial is the dialer's error.
func (p *Pool) Exchange(ctx context.Context, req *Request) (*Response, error) {
	c, reused, err := p.get(ctx, req.Instance, req.Addr, req.Fresh)
	if err != nil {
		return nil, err
	}
	w := watch(ctx, c)
	resp, err := c.exchange(req)
	if err != nil {
		w.stop()
		c.Net.Close()
		if reused && !c.Answered() && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: %w", ErrUnanswered, err)
		}
		return nil, err
	}
	resp.conn, resp.watch = c, w
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

// exchange writes req's head on c and reads the final response.
func (c *Conn) exchange(req *Request) (*Response, error) {
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
	var interim func(*Response)
	if req.Caller != nil {
		req.Caller.WriteFields(bw)
		interim = req.Caller.Interim
	}
	bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return ReadFinal(c.R, req.Method, interim)
}

// Close ends the body's use of its connection (a response of Exchange;
// for others it does nothing). The connection goes back to the pool only
// when the body ended exactly at its framing with no error (a caller that
// stops early, or a read that failed, closes it), the response allows
// another exchange (not Connection: close, not delimited by EOF, not a
// 101), the exchange's context has not ended, and nothing more is
// buffered (invariant 3; put checks the last). Close is idempotent.
func (b *Body) Close() error {
	resp := b.resp
	if resp == nil || resp.conn == nil {
		return nil
	}
	c, w := resp.conn, resp.watch
	resp.conn, resp.watch = nil, ctxWatch{}
	ended := b.kind == bodyNone || b.err == io.EOF
	if w.stop() && ended && b.kind != bodyEOF && !resp.Close && resp.Status != http.StatusSwitchingProtocols {
		c.pool.put(c)
		return nil
	}
	return c.Net.Close()
}
