package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
)

// upstreamResponse is a sandbox's answer on the direct path (#9), read by
// readResponse instead of http.ReadResponse, which cost about a tenth of
// the gateway's CPU in textproto parsing and per-value allocations. The head
// is parsed in place from the connection's read buffer: one string holds
// every header key and value, one []string backs all values, and the
// Header map is reused between responses. Framing, Content-Length checks,
// trailers and connection reuse follow net/http (ReadResponse and
// readTransfer) exactly; the few heads it accepts and we refuse are listed
// at errHeadTooLarge.
type upstreamResponse struct {
	status int
	header http.Header
	// contentLength is http.Response.ContentLength: the declared length, 0
	// when there is no body, -1 when the length is unknown (chunked or
	// delimited by EOF; the direct path then streams).
	contentLength int64
	// close: the connection cannot carry another exchange after this one.
	close bool
	// trailer holds the declared trailer keys (nil values) once the head is
	// read, and the trailers received once the body was read to its end;
	// nil if neither. As http.Response.Trailer.
	trailer http.Header
	body    upstreamBody
}

// Heads net/http would accept but the direct path refuses (502). Each is
// either beyond the connection's read buffer or a known smuggling vector
// whose meaning differs between parsers (RFC 9112 5.1, 5.2: a proxy must
// reject or repair them; we reject).
var (
	errHeadTooLarge = errors.New("head does not fit the 16 KiB read buffer")
	errObsFold      = errors.New("header line folded onto the next (obs-fold)")
	errSpaceInName  = errors.New("whitespace between header name and colon")
	// errStatusCode: not three digits from 100 up (net/http also accepts
	// "+99" and codes below 100, which no server can send on).
	errStatusCode = errors.New("malformed status code")
	// errTooManyInterim: more interim (1xx) heads than maxInterimBytes.
	errTooManyInterim = errors.New("too many interim responses")
)

// maxInterimBytes bounds the 1xx heads skipped before a final response,
// so an app cannot keep a handler busy with an endless stream of them
// (net/http's Transport bounds them by its header size limit).
const maxInterimBytes = 64 << 10

var upstreamResponses = sync.Pool{New: func() any { return new(upstreamResponse) }}

// releaseResponse returns resp to the pool once nothing refers to it or its
// Header map (values handed on to a ResponseWriter stay valid: they are
// never reused).
func releaseResponse(resp *upstreamResponse) {
	if len(resp.header) > 32 {
		resp.header = nil // do not keep a large map alive for small responses
	}
	resp.reset()
	upstreamResponses.Put(resp)
}

// reset empties resp for the next parse, keeping its header map.
func (resp *upstreamResponse) reset() {
	h := resp.header
	clear(h)
	*resp = upstreamResponse{header: h}
}

// readFinalResponse reads the response to a request with the given method,
// skipping 1xx interim responses except 101 as the Transport does.
func readFinalResponse(br *bufio.Reader, method string) (*upstreamResponse, error) {
	resp := upstreamResponses.Get().(*upstreamResponse)
	interim := 0
	for {
		n, err := readResponse(br, method, resp)
		if err != nil {
			releaseResponse(resp)
			return nil, err
		}
		if resp.status >= 200 || resp.status == http.StatusSwitchingProtocols {
			return resp, nil
		}
		if interim += n; interim > maxInterimBytes {
			releaseResponse(resp)
			return nil, fmt.Errorf("read response: %w", errTooManyInterim)
		}
		resp.reset()
	}
}

// readResponse reads one response head from br into resp (whose header
// map, if any, must be empty) and sets up its body as net/http's
// readTransfer would. It reports the size of the head.
func readResponse(br *bufio.Reader, method string, resp *upstreamResponse) (int, error) {
	head, err := peekSection(br)
	if err != nil {
		return 0, fmt.Errorf("read response head: %w", err)
	}
	n := len(head)
	err = resp.parseHead(head, method == http.MethodHead)
	br.Discard(n)
	if err != nil {
		return n, fmt.Errorf("read response head: %w", err)
	}
	resp.body.br = br
	resp.body.resp = resp
	if resp.body.kind == bodyChunked {
		resp.body.chunks = httputil.NewChunkedReader(br)
	}
	return n, nil
}

// peekSection returns the buffered bytes of br up to and including the
// first blank line (a response head or a trailer section) without
// consuming them. Lines end in LF, optionally preceded by CR.
func peekSection(br *bufio.Reader) ([]byte, error) {
	scanned, want := 0, 1
	for {
		buf, err := br.Peek(max(want, br.Buffered()))
		for {
			i := bytes.IndexByte(buf[scanned:], '\n')
			if i < 0 {
				break
			}
			line := buf[scanned : scanned+i]
			scanned += i + 1
			if len(line) == 0 || len(line) == 1 && line[0] == '\r' {
				return buf[:scanned], nil
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull) || len(buf) >= br.Size():
			return nil, errHeadTooLarge
		case err == io.EOF:
			return nil, io.ErrUnexpectedEOF
		case err != nil:
			return nil, err
		}
		want = len(buf) + 1
	}
}

// parseHead parses a head ending in a blank line, as returned by
// peekSection, and frames the body (readTransfer in net/http).
func (resp *upstreamResponse) parseHead(head []byte, isHead bool) error {
	i := bytes.IndexByte(head, '\n')
	if i < 0 {
		return errors.New("unterminated status line")
	}
	major, minor, status, err := parseStatusLine(trimCR(head[:i]))
	if err != nil {
		return err
	}
	resp.status = status
	fields := head[i+1:]
	lines := bytes.Count(fields, nlBytes) - 1 // the last is the blank line
	if resp.header == nil {
		resp.header = make(http.Header, max(lines, 0))
	}
	h := resp.header
	if err := parseFields(fields, lines, h); err != nil {
		return err
	}

	// fixPragmaCacheControl.
	if hp := h["Pragma"]; len(hp) > 0 && hp[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}

	// shouldClose: HTTP/1.1 drops "Connection: close" from the header;
	// HTTP/1.0 keeps the connection only when asked to.
	conn := h["Connection"]
	hasClose := containsToken(conn, "close")
	switch {
	case major < 1:
		resp.close = true
	case major == 1 && minor == 0:
		resp.close = hasClose || !containsToken(conn, "keep-alive")
	case hasClose:
		delete(h, "Connection")
		resp.close = true
	}
	if major == 0 && minor == 0 {
		major, minor = 1, 1 // readTransfer's default
	}

	// Only a single "chunked" coding is supported, and on HTTP/1.0 the
	// header is ignored (net/http issue 12785).
	chunked := false
	if te, ok := h["Transfer-Encoding"]; ok {
		delete(h, "Transfer-Encoding")
		if major > 1 || major == 1 && minor >= 1 {
			if len(te) != 1 {
				return fmt.Errorf("too many transfer encodings: %q", te)
			}
			if !equalFold(te[0], "chunked") {
				return fmt.Errorf("unsupported transfer encoding: %q", te[0])
			}
			chunked = true
		}
	}

	// fixLength: Content-Length values must agree and be valid, whatever
	// the status; duplicates of one value collapse into one.
	cl := int64(-1)
	if cls := h["Content-Length"]; len(cls) > 0 {
		for _, v := range cls[1:] {
			if v != cls[0] {
				return fmt.Errorf("multiple Content-Length headers: %q", cls)
			}
		}
		if len(cls) > 1 {
			h["Content-Length"] = cls[:1:1]
		}
		if cls[0] == "" {
			return errors.New("empty Content-Length")
		}
		n, err := strconv.ParseUint(cls[0], 10, 63)
		if err != nil {
			return fmt.Errorf("bad Content-Length %q", cls[0])
		}
		cl = int64(n)
	}
	bodyAllowed := status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
	var length int64 // readTransfer's realLength
	switch {
	case isHead || !bodyAllowed:
		length = 0
	case chunked:
		delete(h, "Content-Length")
		length = -1
	default:
		length = cl
	}
	resp.contentLength = length
	if isHead {
		resp.contentLength = cl
	}

	// fixTrailer: declared trailers count only with chunked coding.
	if vv, ok := h["Trailer"]; ok && chunked {
		delete(h, "Trailer")
		if err := resp.declareTrailers(vv); err != nil {
			return err
		}
	}

	switch {
	case chunked && (isHead || !bodyAllowed):
		resp.body.kind = bodyNone
	case chunked:
		resp.body.kind = bodyChunked
	case length == 0:
		resp.body.kind = bodyNone
	case length > 0:
		resp.body.kind, resp.body.n = bodyLength, length
	default:
		// Neither length nor chunks: the body runs to EOF (RFC 9112 6.3).
		resp.body.kind = bodyEOF
		resp.close = true
	}
	// A 101 hands the connection to another protocol: never reuse it.
	if status == http.StatusSwitchingProtocols {
		resp.close = true
	}
	return nil
}

func (resp *upstreamResponse) declareTrailers(vv []string) error {
	t := make(http.Header)
	for _, v := range vv {
		for f := range strings.SplitSeq(v, ",") {
			f = trimOWS(f)
			if f == "" {
				continue
			}
			k := http.CanonicalHeaderKey(f)
			switch k {
			case "Transfer-Encoding", "Trailer", "Content-Length":
				return fmt.Errorf("bad trailer key %q", k)
			}
			t[k] = nil
		}
	}
	if len(t) > 0 {
		resp.trailer = t
	}
	return nil
}

var nlBytes = []byte{'\n'}

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

// parseFields adds the field lines of sec (the given number of lines
// ending in a blank line, as peekSection returns) to h under canonical
// keys, with textproto's rules: a name is a non-empty token, a value has
// no control bytes but HTAB and loses surrounding blanks. Keys and values
// are substrings of one string copy of sec, and values sit in one backing
// array, contiguous per key where the lines were.
func parseFields(sec []byte, lines int, h http.Header) error {
	if lines <= 0 {
		return nil
	}
	s := string(sec)
	vals := make([]string, lines)
	for idx := 0; ; idx++ {
		nl := strings.IndexByte(s, '\n')
		if nl < 0 {
			return errors.New("unterminated header section")
		}
		line := s[:nl]
		s = s[nl+1:]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if line == "" {
			return nil
		}
		if idx >= lines {
			return errors.New("unterminated header section")
		}
		if line[0] == ' ' || line[0] == '\t' {
			if idx == 0 {
				return fmt.Errorf("malformed header initial line %q", line)
			}
			return fmt.Errorf("%w: %q", errObsFold, line)
		}
		colon := strings.IndexByte(line, ':')
		if colon <= 0 {
			return fmt.Errorf("malformed header line %q", line)
		}
		key, err := canonicalKey(line[:colon])
		if err != nil {
			return err
		}
		v := line[colon+1:]
		for j := 0; j < len(v); j++ {
			if c := v[j]; c < ' ' && c != '\t' || c == 0x7f {
				return fmt.Errorf("malformed header line %q", line)
			}
		}
		v = trimOWS(v)

		vals[idx] = v
		switch vv, ok := h[key]; {
		case !ok:
			h[key] = vals[idx : idx+1 : idx+1]
		case idx > 0 && len(vv) > 0 && &vv[len(vv)-1] == &vals[idx-1]:
			// Repeated on consecutive lines (Set-Cookie): extend in place.
			h[key] = vals[idx-len(vv) : idx+1 : idx+1]
		default:
			h[key] = append(vv, v)
		}
	}
}

// canonicalKey validates a header name and returns its canonical form
// (http.CanonicalHeaderKey), without allocating when it already is, or
// when it is a common name in other case ("content-type").
func canonicalKey(k string) (string, error) {
	canon, upper := true, true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !tokenByte[c] {
			if c == ' ' {
				return "", fmt.Errorf("%w: %q", errSpaceInName, k)
			}
			return "", fmt.Errorf("malformed header name %q", k)
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canon = false
		}
		upper = c == '-'
	}
	if canon {
		return k, nil
	}
	var buf [32]byte
	if len(k) <= len(buf) {
		b := buf[:len(k)]
		upper := true
		for i := 0; i < len(k); i++ {
			c := k[i]
			if upper && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			} else if !upper && 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b[i] = c
			upper = c == '-'
		}
		if common, ok := commonKeys[string(b)]; ok {
			return common, nil
		}
	}
	return http.CanonicalHeaderKey(k), nil
}

// commonKeys interns the names dev servers commonly send in lower case.
var commonKeys = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept-Ranges", "Access-Control-Allow-Credentials", "Access-Control-Allow-Headers",
		"Access-Control-Allow-Methods", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers",
		"Access-Control-Max-Age", "Age", "Cache-Control", "Connection", "Content-Disposition",
		"Content-Encoding", "Content-Language", "Content-Length", "Content-Location", "Content-Range",
		"Content-Security-Policy", "Content-Type", "Cross-Origin-Embedder-Policy",
		"Cross-Origin-Opener-Policy", "Cross-Origin-Resource-Policy", "Date", "Etag", "Expires",
		"Keep-Alive", "Last-Modified", "Link", "Location", "Pragma", "Referrer-Policy", "Server",
		"Set-Cookie", "Strict-Transport-Security", "Trailer", "Transfer-Encoding", "Vary",
		"X-Content-Type-Options", "X-Frame-Options", "X-Powered-By", "X-Xss-Protection",
	} {
		m[k] = k
	}
	return m
}()

// tokenByte reports the bytes of an HTTP token (RFC 9110 5.6.2), as
// textproto's validHeaderFieldByte.
var tokenByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// containsToken reports whether a comma-separated list in any of vv holds
// token, ignoring ASCII case (httpguts.HeaderValuesContainsToken).
func containsToken(vv []string, token string) bool {
	for _, v := range vv {
		for v != "" {
			f := v
			if i := strings.IndexByte(v, ','); i >= 0 {
				f, v = v[:i], v[i+1:]
			} else {
				v = ""
			}
			if equalFold(trimOWS(f), token) {
				return true
			}
		}
	}
	return false
}
