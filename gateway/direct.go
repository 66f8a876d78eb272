package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// serveDirect forwards a bodiless request to a sandbox without
// httputil.ReverseProxy (#9): the request head is written straight from
// the incoming request to a pooled connection (no clone of the request or
// its headers), and the response is copied back on the handler goroutine.
// The semantics are ReverseProxy's: hop-by-hop headers dropped both ways,
// client-sent X-Forwarded-* replaced by ours, tokens stripped, trailers
// passed on, Host preserved or rewritten per template; one difference:
// interim 1xx answers (103 Early Hints) are dropped, not forwarded. Anything else
// (other methods, bodies, upgrades, fixed upstreams) takes ReverseProxy. It reports
// false, having written nothing, when the request is not for it.
func (p *proxy) serveDirect(w http.ResponseWriter, r *http.Request, t *target) bool {
	if t.sandbox == "" || !idempotent(r.Method) || r.ContentLength != 0 || (r.Body != nil && r.Body != http.NoBody) ||
		len(r.TransferEncoding) > 0 || r.Header.Get("Expect") != "" || r.Header.Get("Upgrade") != "" {
		return false
	}
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
		c, reused, err := p.pool.get(ctx, t.addr)
		if err != nil {
			if attempt == 0 && isDialError(err) {
				if err = p.reensure(ctx, t); err == nil {
					continue
				}
			}
			p.errorHandler(w, r, err)
			return true
		}
		stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
		resp, err := p.directExchange(c, r, t)
		if err != nil {
			stop()
			c.conn.Close()
			if ctx.Err() == nil && reused && attempt == 0 {
				continue // a kept-alive connection the app closed meanwhile
			}
			p.errorHandler(w, r, err)
			return true
		}
		p.copyDirectResponse(w, resp, c, stop)
		return true
	}
}

// directExchange writes r's head for the sandbox and reads the response,
// skipping 1xx interim answers. The caller releases the response.
func (p *proxy) directExchange(c *leanConn, r *http.Request, t *target) (*upstreamResponse, error) {
	bw := c.bw
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	uri := r.URL.EscapedPath()
	if uri == "" {
		uri = "/"
	}
	bw.WriteString(uri)
	// Tokens never reach the sandbox: the verifier strips the query and
	// the headers that may carry one, on copies so the incoming request
	// stays untouched.
	stripped, query := strippedHeaders(r, t)
	if query != "" {
		bw.WriteByte('?')
		bw.WriteString(query)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	if t.rewriteHost {
		bw.WriteString(t.addr)
	} else {
		bw.WriteString(r.Host)
	}
	bw.WriteString("\r\n")
	conn := connectionTokens(r.Header)
	for k, vv := range r.Header {
		if hopByHop(k, conn) || forwardedHeader(k) {
			continue
		}
		if sv, ok := stripped[k]; ok {
			vv = sv
		}
		for _, v := range vv {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	// As httputil does: a client that accepts trailers keeps saying so.
	for _, v := range r.Header["Te"] {
		if strings.Contains(strings.ToLower(v), "trailers") {
			bw.WriteString("Te: trailers\r\n")
			break
		}
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		bw.WriteString("X-Forwarded-For: ")
		bw.WriteString(ip)
		bw.WriteString("\r\n")
	}
	bw.WriteString("X-Forwarded-Host: ")
	bw.WriteString(r.Host)
	if p.g.tls || r.TLS != nil {
		bw.WriteString("\r\nX-Forwarded-Proto: https\r\n\r\n")
	} else {
		bw.WriteString("\r\nX-Forwarded-Proto: http\r\n\r\n")
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return readFinalResponse(c.br, r.Method)
}

// strippedHeaders returns r's query and the token-carrying headers as the
// verifier leaves them (a removed header maps to nil: write no line).
func strippedHeaders(r *http.Request, t *target) (http.Header, string) {
	h := make(http.Header, 3)
	for _, k := range tokenHeaders {
		if v, ok := r.Header[k]; ok {
			h[k] = v
		}
	}
	u := *r.URL
	t.verifier.Strip(&http.Request{Header: h, URL: &u})
	for _, k := range tokenHeaders {
		if _, was := r.Header[k]; was {
			if _, still := h[k]; !still {
				h[k] = nil
			}
		}
	}
	return h, u.RawQuery
}

// tokenHeaders are the headers auth.Verifier.Strip may change.
var tokenHeaders = [...]string{"Cookie", "Authorization", "Referer"}

// idempotent methods may be sent again after a failed attempt.
func idempotent(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// copyDirectResponse sends resp to the client and returns the connection
// to the pool when the body was read to its end.
func (p *proxy) copyDirectResponse(w http.ResponseWriter, resp *upstreamResponse, c *leanConn, stop func() bool) {
	reuse := !resp.close
	h := w.Header()
	copyEndToEnd(h, resp.header)
	if len(resp.trailer) > 0 {
		names := make([]string, 0, len(resp.trailer))
		for k := range resp.trailer {
			names = append(names, k)
		}
		h["Trailer"] = []string{strings.Join(names, ", ")}
	}
	w.WriteHeader(resp.status)
	// Stream what has no known length (SSE, chunked dev-server output) as it
	// comes; buffer the rest like the server would.
	var flush func() error
	if resp.contentLength == -1 {
		flush = http.NewResponseController(w).Flush
	}
	buf := p.rp.BufferPool.Get()
	err := copyBody(w, &resp.body, buf, flush)
	p.rp.BufferPool.Put(buf)
	for k, vv := range resp.trailer {
		h[http.TrailerPrefix+k] = vv
	}
	releaseResponse(resp)
	if !stop() || err != nil || !reuse {
		c.conn.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			// Headers are out: abort the response so the client sees a
			// broken body, not a short one (as ReverseProxy does).
			panic(http.ErrAbortHandler)
		}
		return
	}
	p.pool.put(c)
}

func copyBody(dst io.Writer, src io.Reader, buf []byte, flush func() error) error {
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			if flush != nil {
				if ferr := flush(); ferr != nil {
					return ferr
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
