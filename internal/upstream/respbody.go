package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// Body kinds of a Body.
const (
	bodyNone    = iota // no body: HEAD, 1xx, 204, 304, Content-Length: 0
	bodyLength         // exactly n bytes
	bodyChunked        // Transfer-Encoding: chunked, then trailers
	bodyEOF            // up to the end of the connection
)

// Body reads an Response's body from the connection's
// reader. It returns io.EOF only when the body ended as its framing says,
// and io.ErrUnexpectedEOF when the connection ended before.
type Body struct {
	br     *bufio.Reader
	kind   uint8
	n      int64     // bytes left of a bodyLength body
	chunks io.Reader // the dechunking reader of a bodyChunked body
	resp   *Response
	err    error // sticky: the body ended (io.EOF) or broke
}

// Read reads the body; see Body.
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	switch b.kind {
	case bodyLength:
		if int64(len(p)) > b.n {
			p = p[:b.n]
		}
		n, err := b.br.Read(p)
		b.n -= int64(n)
		switch {
		case b.n == 0:
			b.err = io.EOF // with the last bytes: saves the caller a Read
		case err == io.EOF:
			b.err = io.ErrUnexpectedEOF
		case err != nil:
			b.err = err
		}
		return n, b.err
	case bodyChunked:
		n, err := b.chunks.Read(p)
		if err == io.EOF {
			err = b.readTrailer()
		}
		b.err = err
		return n, err
	case bodyEOF:
		n, err := b.br.Read(p)
		b.err = err
		return n, err
	}
	b.err = io.EOF
	return 0, io.EOF
}

// readTrailer reads the trailer section after the last chunk and merges it
// into resp.trailer (mergeSetHeader in net/http). It returns io.EOF when the
// body ended well.
func (b *Body) readTrailer() error {
	sec, err := peekSection(b.br)
	if err != nil {
		return fmt.Errorf("read trailer: %w", err)
	}
	n := len(sec)
	if n <= 2 { // just the blank line: the common case
		b.br.Discard(n)
		return io.EOF
	}
	t := make(http.Header)
	err = parseFields(sec, bytes.Count(sec, nlBytes)-1, t)
	b.br.Discard(n)
	if err != nil {
		return fmt.Errorf("read trailer: %w", err)
	}
	if b.resp.Trailer == nil {
		b.resp.Trailer = t
	} else {
		for k, vv := range t {
			b.resp.Trailer[k] = vv
		}
	}
	return io.EOF
}

func CopyBody(dst io.Writer, src io.Reader, buf []byte, flush func() error) error {
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
