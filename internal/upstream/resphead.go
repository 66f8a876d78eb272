package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"sync"

	"github.com/previewgate/previewgate/internal/wire"
)

// Response is a sandbox's answer (#9), read by
// readResponse instead of http.ReadResponse, which cost about a tenth of
// the gateway's CPU in textproto parsing and per-value allocations. The head
// is parsed in place from the connection's read buffer: one string holds
// every header key and value, one []string backs all values, and the
// Header map is reused between responses. Framing, Content-Length checks,
// trailers and connection reuse follow net/http (ReadResponse and
// readTransfer) exactly; the few heads it accepts and we refuse are listed
// at ErrHeadTooLarge.
type Response struct {
	Status int
	Header http.Header
	// ContentLength is http.Response.ContentLength: the declared length, 0
	// when there is no body, -1 when the length is unknown (chunked or
	// delimited by EOF; the relay then streams).
	ContentLength int64
	// Close: the connection cannot carry another exchange after this one.
	Close bool
	// Trailer holds the declared trailer keys (nil values) once the head is
	// read, and the trailers received once the body was read to its end;
	// nil if neither. As http.Response.Trailer.
	Trailer http.Header
	Body    Body

	conn  *Conn       // the pooled connection of an Exchange; nil once Body.Close ran
	watch ctxWatch    // the exchange's context hook
	body  *bodyWriter // the exchange's request body, if it has one
}

// Heads net/http would accept but this reader refuses (502). Each is
// either beyond MaxResponseHead or a known smuggling vector whose meaning
// differs between parsers (RFC 9112 5.1, 5.2: a proxy must reject or
// repair them; we reject).
var (
	// ErrHeadTooLarge: a response head (final or interim) longer than
	// MaxResponseHead.
	ErrHeadTooLarge = fmt.Errorf("response head larger than %d KiB", MaxResponseHead>>10)
	errObsFold      = errors.New("header line folded onto the next (obs-fold)")
	errSpaceInName  = wire.ErrSpaceInName
	// errStatusCode: not three digits from 100 up (net/http also accepts
	// "+99" and codes below 100, which no server can send on).
	errStatusCode = errors.New("malformed status code")
	// ErrTooManyInterim: more interim (1xx) heads than MaxInterim.
	ErrTooManyInterim = errors.New("too many interim responses")
	// errBufferFull: a section that does not fit the read buffer; a head
	// is then read by readLongHead, a trailer section is refused.
	errBufferFull = errors.New("section does not fit the read buffer")
)

// MaxResponseHead bounds each response head a sandbox sends, the final
// one and every interim (1xx) one alike, counted as sent: status line,
// header lines and the blank line, with their line ends. Every proxy path
// applies it (see the package doc); one byte more is ErrHeadTooLarge.
//
// 64 KiB: what the ReverseProxy path allowed from #13 on, so no app that
// worked there breaks; four times what the direct path allowed (a
// Next.js or Vite page with a large Content-Security-Policy, Link preload
// list or a stack of Set-Cookie fits); the same as the request head bound
// (limits.max_header_bytes) and Envoy's 60 KiB default. net/http's own
// default (10 MiB) is far more than one app's page needs and lets one
// sandbox make the gateway hold megabytes per request.
//
// MaxInterim bounds how many 1xx heads may come before the final one, so
// an app cannot keep a handler busy with an endless stream of them: one
// exchange reads at most (MaxInterim+1) heads, and holds one at a time.
const (
	MaxResponseHead = 64 << 10
	MaxInterim      = 8
)

var responsePool = sync.Pool{New: func() any { return new(Response) }}

// Release returns resp to the pool once nothing refers to it or its
// Header map (values handed on to a ResponseWriter stay valid: they are
// never reused). It closes the body first when the caller did not.
func Release(resp *Response) {
	resp.Body.Close()
	if len(resp.Header) > 32 {
		resp.Header = nil // do not keep a large map alive for small responses
	}
	resp.reset()
	responsePool.Put(resp)
}

// reset empties resp for the next parse, keeping its header map.
func (resp *Response) reset() {
	h := resp.Header
	clear(h)
	*resp = Response{Header: h}
}

// ReadFinal reads the response to a request with the given method,
// handing each 1xx interim response except 101 to interim (nil: skip them)
// as the Transport hands them to ReverseProxy.
func ReadFinal(br *bufio.Reader, method string, interim func(*Response)) (*Response, error) {
	resp := responsePool.Get().(*Response)
	for count := 1; ; count++ {
		if err := readResponse(br, method, resp); err != nil {
			Release(resp)
			return nil, err
		}
		if resp.Status >= 200 || resp.Status == http.StatusSwitchingProtocols {
			return resp, nil
		}
		if count > MaxInterim {
			Release(resp)
			return nil, fmt.Errorf("read response: %w", ErrTooManyInterim)
		}
		if interim != nil {
			interim(resp)
		}
		resp.reset()
	}
}

// readResponse reads one response head from br into resp (whose header
// map, if any, must be empty) and sets up its body as net/http's
// readTransfer would.
func readResponse(br *bufio.Reader, method string, resp *Response) error {
	head, err := peekSection(br)
	inBuffer := err == nil
	switch {
	case errors.Is(err, errBufferFull):
		head, err = readLongHead(br)
	case inBuffer && len(head) > MaxResponseHead: // a reader with a larger buffer
		err = ErrHeadTooLarge
	}
	if err != nil {
		return fmt.Errorf("read response head: %w", err)
	}
	err = resp.parseHead(head, method == http.MethodHead)
	if inBuffer {
		br.Discard(len(head))
	}
	if err != nil {
		return fmt.Errorf("read response head: %w", err)
	}
	resp.Body.br = br
	resp.Body.resp = resp
	if resp.Body.kind == bodyChunked {
		resp.Body.chunks = httputil.NewChunkedReader(br)
	}
	return nil
}

// readLongHead reads a head that does not fit br's buffer, line by line
// into a buffer of its own, up to MaxResponseHead bytes; beyond that it
// stops reading and returns ErrHeadTooLarge. Lines end in LF, optionally
// preceded by CR, as in peekSection.
func readLongHead(br *bufio.Reader) ([]byte, error) {
	var head []byte
	lineStart := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if len(head)+len(chunk) > MaxResponseHead {
			return nil, ErrHeadTooLarge
		}
		head = append(head, chunk...)
		switch {
		case err == nil:
			if line := head[lineStart:]; len(line) == 1 || len(line) == 2 && line[0] == '\r' {
				return head, nil
			}
			lineStart = len(head)
		case errors.Is(err, bufio.ErrBufferFull): // the line goes on
		case err == io.EOF:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// parseHead parses a head ending in a blank line, as returned by
// peekSection, and frames the body (readTransfer in net/http).
func (resp *Response) parseHead(head []byte, isHead bool) error {
	i := bytes.IndexByte(head, '\n')
	if i < 0 {
		return errors.New("unterminated status line")
	}
	major, minor, status, err := parseStatusLine(trimCR(head[:i]))
	if err != nil {
		return err
	}
	resp.Status = status
	fields := head[i+1:]
	lines := bytes.Count(fields, nlBytes) - 1 // the last is the blank line
	if resp.Header == nil {
		resp.Header = make(http.Header, max(lines, 0))
	}
	h := resp.Header
	if err := parseFields(fields, lines, h); err != nil {
		return err
	}

	// fixPragmaCacheControl.
	if hp := h["Pragma"]; len(hp) > 0 && hp[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
	resp.Close = shouldClose(h, major, minor)
	if major == 0 && minor == 0 {
		major, minor = 1, 1 // readTransfer's default
	}
	chunked, err := transferEncoding(h, major, minor)
	if err != nil {
		return err
	}
	cl, err := contentLength(h)
	if err != nil {
		return err
	}
	return resp.frame(status, chunked, cl, isHead)
}

// parseStatusLine parses "HTTP/x.y ddd reason" as ReadResponse does, but
// only takes three digits from 100 up as a status code.
func parseStatusLine(line []byte) (major, minor, status int, err error) {
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		return 0, 0, 0, fmt.Errorf("malformed status line %q", line)
	}
	proto, rest := line[:sp], bytes.TrimLeft(line[sp+1:], " ")
	if sp := bytes.IndexByte(rest, ' '); sp >= 0 {
		rest = rest[:sp]
	}
	if len(rest) != 3 {
		return 0, 0, 0, fmt.Errorf("malformed status code %q", rest)
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, 0, 0, fmt.Errorf("%w %q", errStatusCode, rest)
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 {
		return 0, 0, 0, fmt.Errorf("%w %q", errStatusCode, rest)
	}
	// http.ParseHTTPVersion, on bytes.
	if len(proto) != len("HTTP/X.Y") || string(proto[:5]) != "HTTP/" || proto[6] != '.' ||
		!isDigit(proto[5]) || !isDigit(proto[7]) {
		return 0, 0, 0, fmt.Errorf("malformed HTTP version %q", proto)
	}
	return int(proto[5] - '0'), int(proto[7] - '0'), status, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func trimCR(line []byte) []byte {
	if len(line) > 0 && line[len(line)-1] == '\r' {
		return line[:len(line)-1]
	}
	return line
}
