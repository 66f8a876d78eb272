package h1server

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"net/url"

	"github.com/previewgate/previewgate/internal/wire"
)

// parse looks for one complete request head at the start of b. It returns
// the head's length (0 when incomplete) and the request, or a nil request
// for a head to hand over. fits is false when b can never complete a
// lean head (a line we would hand over anyway is already visible).
func (c *h1conn) parse(b []byte) (n int, req *http.Request, fits bool) {
	if len(b) > h1MaxHead {
		b = b[:h1MaxHead] // offsets fit in a span
	}
	method, eol := requestLine(b)
	switch {
	case eol == incomplete:
		return 0, nil, len(b) < 2048 && !hasBareLF(b)
	case eol == refused:
		return len(b), nil, false
	}
	f := c.fieldLines(b, eol+2)
	switch {
	case f.pos == incomplete:
		return 0, nil, !hasBareLF(b[f.scanned:])
	case f.pos == refused:
		return len(b), nil, false
	}
	return c.request(b, method, eol, f)
}

// Results of requestLine and fieldLines besides a position.
const (
	incomplete = -1 // more bytes may complete it
	refused    = -2 // not a lean request: hand it over
)

// requestLine parses a lean request line (GET, HEAD or OPTIONS, an
// origin-form target of printable ASCII, HTTP/1.1) and returns the method
// and where the line ends, or incomplete or refused.
func requestLine(b []byte) (method string, eol int) {
	eol = indexCRLF(b)
	if eol < 0 {
		return "", incomplete
	}
	line := b[:eol]
	switch {
	case hasPrefix(line, "GET "):
		method = http.MethodGet
	case hasPrefix(line, "HEAD "):
		method = http.MethodHead
	case hasPrefix(line, "OPTIONS "):
		method = http.MethodOptions
	default:
		return "", refused
	}
	rest := line[len(method)+1:]
	if len(rest) < len(" HTTP/1.1")+1 || string(rest[len(rest)-9:]) != " HTTP/1.1" || rest[0] != '/' {
		return "", refused
	}
	for _, ch := range rest[:len(rest)-9] {
		if ch <= ' ' || ch >= 0x7f {
			return "", refused
		}
	}
	return method, eol
}

// fields is what fieldLines found: the head's end (or incomplete or
// refused; scanned is where an incomplete line starts), the number of
// lines recorded in h1conn.lines, which one is Host, and whether the
// client asked to close.
type fields struct {
	pos, scanned, n, host int
	closeConn             bool
}

// fieldLines parses the header lines from pos to the blank line, recording
// their spans in c.lines. A line the lean loop does not take (a body, an
// upgrade, Expect, Connection options, a bad Host, anything malformed)
// refuses the request.
func (c *h1conn) fieldLines(b []byte, pos int) fields {
	f := fields{host: -1}
	for {
		rem := b[pos:]
		e := indexCRLF(rem)
		if e < 0 {
			f.pos, f.scanned = incomplete, pos
			return f
		}
		if e == 0 {
			if f.host < 0 {
				f.pos = refused
				return f
			}
			f.pos = pos + 2
			return f
		}
		if f.n == h1MaxLines {
			f.pos = refused
			return f
		}
		sp, ok := fieldSpan(rem[:e], pos)
		if !ok || !f.take(b, sp) {
			f.pos = refused
			return f
		}
		c.lines[f.n] = sp
		f.n++
		pos += e + 2
	}
}

// take checks a field line the lean loop cares about, and notes Host and
// Connection: close.
func (f *fields) take(b []byte, sp span) bool {
	name, value := b[sp.name[0]:sp.name[1]], b[sp.value[0]:sp.value[1]]
	switch {
	case wire.EqualFold(name, "Host"):
		if f.host >= 0 || !validHost(value) {
			return false
		}
		f.host = f.n
	case wire.EqualFold(name, "Content-Length"), wire.EqualFold(name, "Transfer-Encoding"),
		wire.EqualFold(name, "Upgrade"), wire.EqualFold(name, "Expect"), wire.EqualFold(name, "Trailer"):
		return false
	case wire.EqualFold(name, "Connection"):
		var ok bool
		if f.closeConn, ok = connectionOptions(value, f.closeConn); !ok {
			return false
		}
	}
	return true
}

// fieldSpan locates the name and the OWS-trimmed value of field line l,
// which starts at offset pos of the head. It refuses a name that is not a
// token (obs-fold, space before the colon, junk) and control bytes in the
// value.
func fieldSpan(l []byte, pos int) (span, bool) {
	colon := -1
	for i, ch := range l {
		if ch == ':' {
			colon = i
			break
		}
		if !wire.IsToken(ch) {
			return span{}, false
		}
	}
	if colon <= 0 {
		return span{}, false
	}
	vs, ve := colon+1, len(l)
	for vs < ve && (l[vs] == ' ' || l[vs] == '\t') {
		vs++
	}
	for ve > vs && (l[ve-1] == ' ' || l[ve-1] == '\t') {
		ve--
	}
	if !ctlFree(l[vs:ve]) {
		return span{}, false
	}
	return span{name: [2]uint16{uint16(pos), uint16(pos + colon)},
		value: [2]uint16{uint16(pos + vs), uint16(pos + ve)}}, true
}

// request builds the request from a complete lean head and asks the Lean
// hook whether the lean loop serves it.
func (c *h1conn) request(b []byte, method string, eol int, f fields) (int, *http.Request, bool) {
	pos := f.pos
	// One string holds the whole head; every field is a slice of it, so
	// the handler may keep any of them.
	head := string(b[:pos])
	hs := c.lines[f.host]
	hostStr := head[hs.value[0]:hs.value[1]]
	targetStr := head[len(method)+1 : eol-9]
	u, err := url.ParseRequestURI(targetStr)
	if err != nil {
		return pos, nil, true
	}
	h := make(http.Header, f.n)
	vals := make([]string, f.n)
	for i := range f.n {
		if i == f.host {
			continue // net/http moves Host to Request.Host
		}
		sp := c.lines[i]
		k := head[sp.name[0]:sp.name[1]]
		k, _ = wire.CanonicalKey(k) // checked above: token bytes only
		vals[i] = head[sp.value[0]:sp.value[1]]
		if old, ok := h[k]; ok {
			h[k] = append(old, vals[i])
		} else {
			h[k] = vals[i : i+1 : i+1]
		}
	}
	// Built on the stack and copied once by WithContext (inlined): one
	// Request on the heap per request, not two. Lean sees the request the
	// handler gets.
	base := http.Request{
		Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, Host: hostStr, Close: f.closeConn,
		RemoteAddr: c.remote, RequestURI: targetStr, TLS: c.tlsState,
	}
	r := base.WithContext(c.ctx)
	if !c.s.Lean(r) {
		return pos, nil, true
	}
	return pos, r, true
}

// ctlFree reports whether b holds no control byte but HTAB and no DEL,
// the bytes a field value may not carry. Eight bytes at a time (#25: a
// browser's Cookie line is hundreds of bytes): a word is checked byte by
// byte only when the word tests below say it may hold a byte under 0x20
// (HTAB included) or a 0x7f. Both tests are exact about whether such a
// byte is in the word (they can misplace it, never miss it), so a word
// they pass holds none; TestCtlFree compares with the byte loop.
func ctlFree(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		del := x ^ (ones * 0x7f) // a zero byte where x has 0x7f
		if ((x-ones*0x20)&^x|(del-ones)&^del)&highs != 0 && !ctlFreeBytes(b[:8]) {
			return false
		}
		b = b[8:]
	}
	return ctlFreeBytes(b)
}

func ctlFreeBytes(b []byte) bool {
	for _, ch := range b {
		if (ch < ' ' && ch != '\t') || ch == 0x7f {
			return false
		}
	}
	return true
}

// indexCRLF returns where the first line of b ends (its CR), or -1 when
// b has no complete line or its first line break is not CRLF (a bare LF,
// or a CR not followed by LF: not ours). Two IndexByte scans instead of a
// loop over every byte (#25): the answer is that of checking each byte in
// turn, since the first LF decides whether a line ended, and any CR
// before the one that precedes it is a lone CR.
func indexCRLF(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	if lf < 1 || b[lf-1] != '\r' || bytes.IndexByte(b[:lf-1], '\r') >= 0 {
		return -1
	}
	return lf - 1
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

// connectionOptions accepts Connection values made only of keep-alive and
// close; other options name hop-by-hop headers, which net/http handles.
func connectionOptions(v []byte, closeConn bool) (bool, bool) {
	for len(v) > 0 {
		var tok []byte
		tok, v, _ = bytes.Cut(v, comma)
		switch tok = wire.TrimOWS(tok); {
		case wire.EqualFold(tok, "close"):
			closeConn = true
		case wire.EqualFold(tok, "keep-alive"), len(tok) == 0:
		default:
			return closeConn, false
		}
	}
	return closeConn, true
}

var comma = []byte{','}

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
