package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// readResult is what the direct path (or, for comparison, net/http) makes
// of a byte stream from the app: the final response and its whole body.
type readResult struct {
	Status        int
	Header        http.Header
	ContentLength int64
	Close         bool
	Body          string
	bodyErr       error
	Trailer       http.Header
	consumed      int // bytes taken from the stream, head and body
}

// countingReader counts what bufio takes from the stream.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// readOurs reads data with the direct path's reader; oneByte feeds it a
// byte per Read, as a slow connection might.
func readOurs(data []byte, method string, oneByte bool) (*readResult, error) {
	var r io.Reader = bytes.NewReader(data)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 16<<10)
	resp, err := ReadFinal(br, method, nil)
	if err != nil {
		return nil, err
	}
	res := &readResult{Status: resp.Status, Header: resp.Header.Clone(), ContentLength: resp.ContentLength, Close: resp.Close}
	body, err := io.ReadAll(&resp.Body)
	res.Body, res.bodyErr, res.Trailer = string(body), err, resp.Trailer.Clone()
	res.consumed = cr.n - br.Buffered()
	Release(resp)
	return res, nil
}

// readNetHTTP reads data as the direct path did before #9: ReadResponse,
// skipping interim responses but 101.
func readNetHTTP(data []byte, method string) (*readResult, error) {
	cr := &countingReader{r: bytes.NewReader(data)}
	br := bufio.NewReaderSize(cr, 16<<10)
	req := &http.Request{Method: method}
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode/100 == 1 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		res := &readResult{Status: resp.StatusCode, Header: resp.Header, ContentLength: resp.ContentLength, Close: resp.Close}
		body, err := io.ReadAll(resp.Body)
		res.Body, res.bodyErr, res.Trailer = string(body), err, resp.Trailer
		res.consumed = cr.n - br.Buffered()
		return res, nil
	}
}

func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !slices.Equal(va, vb) {
			return false
		}
	}
	return true
}

// stricter reports whether err is one of the deliberate refusals of heads
// net/http accepts (see ErrHeadTooLarge), and it fits data and what
// net/http made of it, so a bug cannot hide behind one.
func stricter(err error, data []byte, theirs *readResult) bool {
	anyKey := func(h http.Header, bad func(string) bool) bool {
		for k := range h {
			if bad(k) {
				return true
			}
		}
		return false
	}
	switch {
	case errors.Is(err, ErrHeadTooLarge):
		return len(data) > MaxResponseHead
	case errors.Is(err, errObsFold):
		return bytes.Contains(data, []byte("\n ")) || bytes.Contains(data, []byte("\n\t"))
	case errors.Is(err, errSpaceInName):
		hasSpace := func(k string) bool { return strings.ContainsRune(k, ' ') }
		// In a 1xx head too, whose fields net/http reads and drops (CI's
		// fuzz run found one: "HTTP/0.0 100 \n0 :\n\n...").
		return anyKey(theirs.Header, hasSpace) || anyKey(theirs.Trailer, hasSpace) ||
			interimHeads(data) > 0 && spaceInAName(data)
	case errors.Is(err, errStatusCode):
		return theirs.Status < 100
	case errors.Is(err, ErrTooManyInterim):
		return interimHeads(data) > MaxInterim
	}
	return false
}

// spaceInAName reports a field line of data whose name holds a space or
// tab anywhere ("0 0:" as well as "0 :"; a second fuzz find), status
// lines aside.
func spaceInAName(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		name, _, ok := bytes.Cut(line, []byte(":"))
		if ok && !bytes.HasPrefix(line, []byte("HTTP/")) && bytes.ContainsAny(name, " \t") {
			return true
		}
	}
	return false
}

// compareWithNetHTTP fails t unless the direct path reads data as
// http.ReadResponse does, or refuses it deliberately.
func compareWithNetHTTP(t *testing.T, data []byte, method string, oneByte bool) {
	t.Helper()
	ours, oerr := readOurs(data, method, oneByte)
	theirs, terr := readNetHTTP(data, method)
	switch {
	case terr != nil && oerr != nil:
		return
	case terr != nil:
		t.Fatalf("net/http refused the head (%v), we read it: %+v", terr, ours)
	case oerr != nil:
		if !stricter(oerr, data, theirs) {
			t.Fatalf("we refused the head (%v), net/http read it: %+v", oerr, theirs)
		}
		return
	}
	if ours.Status != theirs.Status {
		t.Fatalf("got status %d, want %d", ours.Status, theirs.Status)
	}
	if !sameHeader(ours.Header, theirs.Header) {
		t.Fatalf("got header %q, want %q", ours.Header, theirs.Header)
	}
	if ours.ContentLength != theirs.ContentLength {
		t.Fatalf("got content length %d, want %d", ours.ContentLength, theirs.ContentLength)
	}
	// A 101 connection is never reused (deliberate).
	if ours.Close != theirs.Close && !(ours.Status == http.StatusSwitchingProtocols && ours.Close) {
		t.Fatalf("got close %v, want %v", ours.Close, theirs.Close)
	}
	switch {
	case theirs.bodyErr == nil && ours.bodyErr != nil:
		if !stricter(ours.bodyErr, data, theirs) {
			t.Fatalf("we broke off the body (%v), net/http read it: %q", ours.bodyErr, theirs.Body)
		}
		return
	case theirs.bodyErr != nil:
		// We may read further (a trailer section ended by a bare LF,
		// which net/http takes only with a CRLF CRLF in view), never less.
		if !strings.HasPrefix(ours.Body, theirs.Body) {
			t.Fatalf("got body %q (%v), want it to start like net/http's %q (%v)", ours.Body, ours.bodyErr, theirs.Body, theirs.bodyErr)
		}
		return
	}
	if ours.Body != theirs.Body {
		t.Fatalf("got body %q, want %q", ours.Body, theirs.Body)
	}
	if !sameHeader(ours.Trailer, theirs.Trailer) {
		t.Fatalf("got trailer %q, want %q", ours.Trailer, theirs.Trailer)
	}
	if ours.consumed != theirs.consumed {
		t.Fatalf("consumed %d bytes, net/http %d", ours.consumed, theirs.consumed)
	}
}

type respHeadCase struct {
	name   string
	method string
	in     string
	// want, unless wantErr or wantBodyErr is set
	status  int
	header  http.Header
	cl      int64
	close   bool
	body    string
	trailer http.Header
	rest    string // left in the stream after the body
	// wantErr: the head is refused; errors.Is when a sentinel is given.
	wantErr     bool
	errIs       error
	wantBodyErr error
}

var respHeadCases = []respHeadCase{
	{name: "content length exact", method: "GET",
		in:     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhelloHTTP/1.1 204",
		status: 200, header: http.Header{"Content-Length": {"5"}, "Content-Type": {"text/plain"}}, cl: 5, body: "hello", rest: "HTTP/1.1 204"},
	{name: "content length short", method: "GET",
		in:          "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello",
		wantBodyErr: io.ErrUnexpectedEOF},
	{name: "content length duplicates agree", method: "GET",
		in:     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
		status: 200, header: http.Header{"Content-Length": {"2"}}, cl: 2, body: "hi"},
	{name: "content length duplicates differ", method: "GET",
		in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!", wantErr: true},
	{name: "content length differ on 304", method: "GET",
		in: "HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", wantErr: true},
	{name: "content length not digits", method: "GET",
		in: "HTTP/1.1 200 OK\r\nContent-Length: 5a\r\n\r\nhello", wantErr: true},
	{name: "content length negative", method: "GET",
		in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello", wantErr: true},
	{name: "content length signed", method: "GET",
		in: "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello", wantErr: true},
	{name: "content length empty", method: "GET",
		in: "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\nhello", wantErr: true},
	{name: "content length list", method: "GET",
		in: "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello", wantErr: true},
	{name: "content length overflow", method: "GET",
		in: "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", wantErr: true},
	{name: "chunked with trailers", method: "GET",
		in: "HTTP/1.1 200 OK\r\nTrailer: X-Sum, x-late\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n" +
			"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Sum: 42\r\nX-Undeclared: 1\r\n\r\nNEXT",
		status: 200, header: http.Header{"Content-Type": {"text/event-stream"}}, cl: -1, body: "hello world",
		trailer: http.Header{"X-Sum": {"42"}, "X-Late": nil, "X-Undeclared": {"1"}}, rest: "NEXT"},
	{name: "chunked drops content length", method: "GET",
		in:     "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
		status: 200, header: http.Header{}, cl: -1, body: "hi"},
	{name: "chunked trailer declares framing", method: "GET",
		in: "HTTP/1.1 200 OK\r\nTrailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", wantErr: true},
	{name: "chunked malformed", method: "GET",
		in:          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhi\r\n0\r\n\r\n",
		wantBodyErr: errAny},
	{name: "chunked trailer folded", method: "GET",
		in:          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Sum: 4\r\n 2\r\n\r\n",
		wantBodyErr: errObsFold},
	{name: "trailer without chunks stays a header", method: "GET",
		in:     "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 0\r\n\r\n",
		status: 200, header: http.Header{"Trailer": {"X-Sum"}, "Content-Length": {"0"}}, cl: 0},
	{name: "transfer encoding gzip", method: "GET",
		in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", wantErr: true},
	{name: "transfer encoding gzip, chunked", method: "GET",
		in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", wantErr: true},
	{name: "transfer encoding twice", method: "GET",
		in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", wantErr: true},
	{name: "transfer encoding ignored on HTTP/1.0", method: "GET",
		in:     "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
		status: 200, header: http.Header{}, cl: -1, close: true, body: "2\r\nhi\r\n0\r\n\r\n"},
	{name: "no framing reads to EOF", method: "GET",
		in:     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end",
		status: 200, header: http.Header{"Content-Type": {"text/plain"}}, cl: -1, close: true, body: "until the end"},
	{name: "HEAD with content length", method: "HEAD",
		in:     "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\nHTTP/1.1 200 OK",
		status: 200, header: http.Header{"Content-Length": {"1234"}}, cl: 1234, rest: "HTTP/1.1 200 OK"},
	{name: "HEAD with chunked keeps length", method: "HEAD",
		in:     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 7\r\n\r\n",
		status: 200, header: http.Header{"Content-Length": {"7"}}, cl: 7},
	{name: "HEAD without length", method: "HEAD",
		in:     "HTTP/1.1 200 OK\r\n\r\nNEXT",
		status: 200, header: http.Header{}, cl: -1, rest: "NEXT"},
	{name: "204", method: "GET",
		in:     "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\nNEXT",
		status: 204, header: http.Header{"X-A": {"1"}}, cl: 0, rest: "NEXT"},
	{name: "304 with length", method: "GET",
		in:     "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nEtag: \"x\"\r\n\r\nNEXT",
		status: 304, header: http.Header{"Content-Length": {"10"}, "Etag": {`"x"`}}, cl: 0, rest: "NEXT"},
	{name: "1xx then 200", method: "GET",
		in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		status: 200, header: http.Header{"Content-Length": {"2"}}, cl: 2, body: "ok"},
	{name: "101 is final, never reused", method: "GET",
		in:     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nraw",
		status: 101, header: http.Header{"Upgrade": {"x"}}, cl: 0, close: true, rest: "raw"},
	{name: "too many interim", method: "GET",
		in:      strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", MaxInterim+1) + "HTTP/1.1 200 OK\r\n\r\n",
		wantErr: true, errIs: ErrTooManyInterim},
	{name: "connection close", method: "GET",
		in:     "HTTP/1.1 200 OK\r\nConnection: X-A, Close\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n",
		status: 200, header: http.Header{"X-A": {"1"}, "Content-Length": {"0"}}, cl: 0, close: true},
	{name: "HTTP/1.0 without keep-alive", method: "GET",
		in:     "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi",
		status: 200, header: http.Header{"Content-Length": {"2"}}, cl: 2, close: true, body: "hi"},
	{name: "HTTP/1.0 keep-alive", method: "GET",
		in:     "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
		status: 200, header: http.Header{"Connection": {"keep-alive"}, "Content-Length": {"2"}}, cl: 2, body: "hi"},
	{name: "lowercase names", method: "GET",
		in:     "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nx-my-header: a\r\nCONTENT-TYPE: b\r\netag: c\r\n\r\n",
		status: 200, header: http.Header{"Content-Length": {"0"}, "X-My-Header": {"a"}, "Content-Type": {"b"}, "Etag": {"c"}}, cl: 0},
	{name: "repeated names keep order", method: "GET",
		in:     "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nVary: A\r\nSet-Cookie: c=3\r\nContent-Length: 0\r\nVary: B\r\n\r\n",
		status: 200, header: http.Header{"Set-Cookie": {"a=1", "b=2", "c=3"}, "Vary": {"A", "B"}, "Content-Length": {"0"}}, cl: 0},
	{name: "values trimmed, bare LF, empty value", method: "GET",
		in:     "HTTP/1.1 200 OK\nX-A: \t spaced \t\nX-B:\nX-C:x\nContent-Length: 0\n\n",
		status: 200, header: http.Header{"X-A": {"spaced"}, "X-B": {""}, "X-C": {"x"}, "Content-Length": {"0"}}, cl: 0},
	{name: "pragma no-cache", method: "GET",
		in:     "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n",
		status: 200, header: http.Header{"Pragma": {"no-cache"}, "Cache-Control": {"no-cache"}, "Content-Length": {"0"}}, cl: 0},
	{name: "obs-text value", method: "GET",
		in:     "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n",
		status: 200, header: http.Header{"X-A": {"caf\xc3\xa9"}, "Content-Length": {"0"}}, cl: 0},
	// Heads longer than the 16 KiB read buffer are read line by line,
	// up to MaxResponseHead.
	{name: "head over the read buffer", method: "GET",
		in:     testkit.SizedHead("200 OK", "Content-Length: 2\r\n", 20<<10) + "ok",
		status: 200, header: http.Header{"Content-Length": {"2"}, "X-Big": {strings.Repeat("b", testkit.SizedHeadPad("200 OK", "Content-Length: 2\r\n", 20<<10))}}, cl: 2, body: "ok"},
	{name: "head at the bound", method: "GET",
		in:     testkit.SizedHead("200 OK", "Content-Length: 2\r\n", MaxResponseHead) + "ok",
		status: 200, header: http.Header{"Content-Length": {"2"}, "X-Big": {strings.Repeat("b", testkit.SizedHeadPad("200 OK", "Content-Length: 2\r\n", MaxResponseHead))}}, cl: 2, body: "ok"},
	{name: "head over the bound", method: "GET",
		in:      testkit.SizedHead("200 OK", "Content-Length: 2\r\n", MaxResponseHead+1) + "ok",
		wantErr: true, errIs: ErrHeadTooLarge},
	{name: "one long line over the bound", method: "GET",
		in:      "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 100<<10) + "\r\n\r\n",
		wantErr: true, errIs: ErrHeadTooLarge},
	{name: "long head, bare LF, many lines", method: "GET",
		in:     "HTTP/1.1 200 OK\n" + strings.Repeat("X-A: "+strings.Repeat("a", 90)+"\n", 300) + "Content-Length: 0\n\n",
		status: 200, header: http.Header{"X-A": slices.Repeat([]string{strings.Repeat("a", 90)}, 300), "Content-Length": {"0"}}, cl: 0},
	{name: "interim at the bound", method: "GET",
		in:     testkit.SizedHead("103 Early Hints", "", MaxResponseHead) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		status: 200, header: http.Header{"Content-Length": {"2"}}, cl: 2, body: "ok"},
	{name: "interim over the bound", method: "GET",
		in:      testkit.SizedHead("103 Early Hints", "", MaxResponseHead+1) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		wantErr: true, errIs: ErrHeadTooLarge},
	{name: "long head cut short", method: "GET",
		in: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 20<<10), wantErr: true},
	{name: "obs-fold", method: "GET",
		in: "HTTP/1.1 200 OK\r\nX-A: 1\r\n  2\r\nContent-Length: 0\r\n\r\n", wantErr: true, errIs: errObsFold},
	{name: "obs-fold tab", method: "GET",
		in: "HTTP/1.1 200 OK\r\nX-A: 1\r\n\t2\r\n\r\n", wantErr: true, errIs: errObsFold},
	{name: "leading space on first field", method: "GET",
		in: "HTTP/1.1 200 OK\r\n X-A: 1\r\n\r\n", wantErr: true},
	{name: "space before colon", method: "GET",
		in: "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello", wantErr: true, errIs: errSpaceInName},
	{name: "line without colon", method: "GET",
		in: "HTTP/1.1 200 OK\r\ngarbage\r\n\r\n", wantErr: true},
	{name: "empty name", method: "GET",
		in: "HTTP/1.1 200 OK\r\n: x\r\n\r\n", wantErr: true},
	{name: "bad name byte", method: "GET",
		in: "HTTP/1.1 200 OK\r\nX(A): x\r\n\r\n", wantErr: true},
	{name: "control byte in value", method: "GET",
		in: "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n", wantErr: true},
	{name: "bare CR in value", method: "GET",
		in: "HTTP/1.1 200 OK\r\nX-A: a\rX-B: b\r\n\r\n", wantErr: true},
	{name: "status line without code", method: "GET",
		in: "HTTP/1.1\r\n\r\n", wantErr: true},
	{name: "status code two digits", method: "GET",
		in: "HTTP/1.1 20 OK\r\n\r\n", wantErr: true},
	{name: "status code below 100", method: "GET",
		in: "HTTP/1.1 099 Odd\r\n\r\n", wantErr: true, errIs: errStatusCode},
	{name: "bad version", method: "GET",
		in: "HTTP/1.10 200 OK\r\n\r\n", wantErr: true},
	{name: "truncated head", method: "GET",
		in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", wantErr: true, errIs: io.ErrUnexpectedEOF},
	{name: "empty stream", method: "GET",
		in: "", wantErr: true, errIs: io.ErrUnexpectedEOF},
	{name: "status without reason, spaces", method: "GET",
		in:     "HTTP/1.1   404\r\nContent-Length: 0\r\n\r\n",
		status: 404, header: http.Header{"Content-Length": {"0"}}, cl: 0},
}

// errAny marks a case expecting some body error.
var errAny = errors.New("any error")

func TestReadResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range respHeadCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testReadResponse(t, tc, strings.NewReader(tc.in))
		})
		t.Run(tc.name+" byte by byte", func(t *testing.T) {
			t.Parallel()
			testReadResponse(t, tc, iotest.OneByteReader(strings.NewReader(tc.in)))
		})
	}
}

func testReadResponse(t *testing.T, tc respHeadCase, in io.Reader) {
	t.Helper()
	br := bufio.NewReaderSize(in, 16<<10)
	resp, err := ReadFinal(br, tc.method, nil)
	if tc.wantErr {
		if err == nil {
			t.Fatalf("got status %d, want an error", resp.Status)
		}
		if tc.errIs != nil && !errors.Is(err, tc.errIs) {
			t.Fatalf("got error %v, want %v", err, tc.errIs)
		}
		return
	}
	if err != nil {
		t.Fatalf("got error %v", err)
	}
	body, err := io.ReadAll(&resp.Body)
	if tc.wantBodyErr != nil {
		if err == nil || tc.wantBodyErr != errAny && !errors.Is(err, tc.wantBodyErr) {
			t.Fatalf("got body error %v, want %v", err, tc.wantBodyErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("got body error %v", err)
	}
	if resp.Status != tc.status {
		t.Errorf("got status %d, want %d", resp.Status, tc.status)
	}
	if !sameHeader(resp.Header, tc.header) {
		t.Errorf("got header %q, want %q", resp.Header, tc.header)
	}
	if resp.ContentLength != tc.cl {
		t.Errorf("got content length %d, want %d", resp.ContentLength, tc.cl)
	}
	if resp.Close != tc.close {
		t.Errorf("got close %v, want %v", resp.Close, tc.close)
	}
	if string(body) != tc.body {
		t.Errorf("got body %q, want %q", body, tc.body)
	}
	if !sameHeader(resp.Trailer, tc.trailer) {
		t.Errorf("got trailer %q, want %q", resp.Trailer, tc.trailer)
	}
	if rest, _ := io.ReadAll(br); string(rest) != tc.rest {
		t.Errorf("left %q in the stream, want %q", rest, tc.rest)
	}
}

// TestReadResponseMatchesNetHTTP runs the cases through both parsers.
func TestReadResponseMatchesNetHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range respHeadCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			compareWithNetHTTP(t, []byte(tc.in), tc.method, false)
			compareWithNetHTTP(t, []byte(tc.in), tc.method, true)
		})
	}
}

// TestReadResponseReusesHeader checks that a pooled response starts empty:
// nothing of an earlier response leaks into the next.
func TestReadResponseReusesHeader(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nX-First: 1\r\nContent-Length: 0\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nX-Second: 2\r\nContent-Length: 0\r\n\r\n"
	br := bufio.NewReaderSize(strings.NewReader(in), 16<<10)
	var first []string // kept by a caller past the release
	for i, want := range []http.Header{
		{"X-First": {"1"}, "Content-Length": {"0"}},
		{"X-Second": {"2"}, "Content-Length": {"0"}},
	} {
		resp, err := ReadFinal(br, "GET", nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if !sameHeader(resp.Header, want) {
			t.Fatalf("response %d: got header %q, want %q", i, resp.Header, want)
		}
		if i == 0 {
			first = resp.Header["X-First"]
		}
		Release(resp)
	}
	// The second parse reused the pooled response: values handed out
	// earlier must not have been overwritten by it.
	if len(first) != 1 || first[0] != "1" {
		t.Fatalf("a released response's values changed after the next parse: got %q", first)
	}
}

func FuzzResponseHead(f *testing.F) {
	for _, tc := range respHeadCases {
		if len(tc.in) < 4<<10 {
			f.Add([]byte(tc.in), tc.method == "HEAD", false)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, head, oneByte bool) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		compareWithNetHTTP(t, data, method, oneByte)
	})
}

func BenchmarkReadResponse(b *testing.B) {
	in := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/javascript\r\nCache-Control: no-cache\r\n" +
		"Etag: W/\"4d2-abc\"\r\nDate: Mon, 02 Jan 2026 15:04:05 GMT\r\nConnection: keep-alive\r\n" +
		"Keep-Alive: timeout=5\r\nContent-Length: 16\r\n\r\n0123456789abcdef")
	rd := bytes.NewReader(in)
	br := bufio.NewReaderSize(rd, 16<<10)
	buf := make([]byte, 32<<10)
	b.Run("lean", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rd.Reset(in)
			br.Reset(rd)
			resp, err := ReadFinal(br, "GET", nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := CopyBody(io.Discard, &resp.Body, buf, nil); err != nil {
				b.Fatal(err)
			}
			Release(resp)
		}
	})
	b.Run("net/http", func(b *testing.B) {
		b.ReportAllocs()
		req := &http.Request{Method: "GET"}
		for b.Loop() {
			rd.Reset(in)
			br.Reset(rd)
			resp, err := http.ReadResponse(br, req)
			if err != nil {
				b.Fatal(err)
			}
			if err := CopyBody(io.Discard, resp.Body, buf, nil); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	})
}

// interimHeads counts the 1xx heads (not 101) net/http reads before the
// final response in data.
func interimHeads(data []byte) int {
	br := bufio.NewReader(bytes.NewReader(data))
	n := 0
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return n
		}
		n++
	}
}
