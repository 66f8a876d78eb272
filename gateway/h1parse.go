package gateway

import (
	"net/http"
	"net/url"
)

// parse looks for one complete request head at the start of b. It returns
// the head's length (0 when incomplete) and the request, or a nil request
// for a head to hand over. fits is false when b can never complete a
// lean head (a line we would hand over anyway is already visible).
func (c *h1conn) parse(b []byte) (n int, req *http.Request, fits bool) {
	if len(b) > h1MaxHead {
		b = b[:h1MaxHead] // offsets fit in a span
	}
	// Request line.
	eol := indexCRLF(b)
	if eol < 0 {
		return 0, nil, len(b) < 2048 && !hasBareLF(b)
	}
	line := b[:eol]
	var method string
	switch {
	case hasPrefix(line, "GET "):
		method = http.MethodGet
	case hasPrefix(line, "HEAD "):
		method = http.MethodHead
	case hasPrefix(line, "OPTIONS "):
		method = http.MethodOptions
	default:
		return len(b), nil, false
	}
	rest := line[len(method)+1:]
	if len(rest) < len(" HTTP/1.1")+1 || string(rest[len(rest)-9:]) != " HTTP/1.1" || rest[0] != '/' {
		return len(b), nil, false
	}
	target := rest[:len(rest)-9]
	for _, ch := range target {
		if ch <= ' ' || ch >= 0x7f {
			return len(b), nil, false
		}
	}
	// Header lines.
	pos := eol + 2
	nlines := 0
	host := -1
	closeConn := false
	for {
		rem := b[pos:]
		e := indexCRLF(rem)
		if e < 0 {
			return 0, nil, !hasBareLF(rem)
		}
		if e == 0 {
			pos += 2
			break
		}
		if nlines == h1MaxLines {
			return len(b), nil, false
		}
		l := rem[:e]
		colon := -1
		for i, ch := range l {
			if ch == ':' {
				colon = i
				break
			}
			if !tokenByte[ch] {
				return len(b), nil, false // obs-fold, space before colon, junk
			}
		}
		if colon <= 0 {
			return len(b), nil, false
		}
		vs, ve := colon+1, len(l)
		for vs < ve && (l[vs] == ' ' || l[vs] == '\t') {
			vs++
		}
		for ve > vs && (l[ve-1] == ' ' || l[ve-1] == '\t') {
			ve--
		}
		for _, ch := range l[vs:ve] {
			if (ch < ' ' && ch != '\t') || ch == 0x7f {
				return len(b), nil, false
			}
		}
		name, value := l[:colon], l[vs:ve]
		switch {
		case equalFold(name, "Host"):
			if host >= 0 || !validHost(value) {
				return len(b), nil, false
			}
			host = nlines
		case equalFold(name, "Content-Length"), equalFold(name, "Transfer-Encoding"),
			equalFold(name, "Upgrade"), equalFold(name, "Expect"), equalFold(name, "Trailer"):
			return len(b), nil, false
		case equalFold(name, "Connection"):
			var ok bool
			if closeConn, ok = connectionOptions(value, closeConn); !ok {
				return len(b), nil, false
			}
		}
		c.lines[nlines] = span{name: [2]uint16{uint16(pos), uint16(pos + colon)},
			value: [2]uint16{uint16(pos + vs), uint16(pos + ve)}}
		nlines++
		pos += e + 2
	}
	if host < 0 {
		return len(b), nil, false
	}
	// One string holds the whole head; every field is a slice of it, so
	// the handler may keep any of them.
	head := string(b[:pos])
	hs := c.lines[host]
	hostStr := head[hs.value[0]:hs.value[1]]
	targetStr := head[len(method)+1 : eol-9]
	u, err := url.ParseRequestURI(targetStr)
	if err != nil {
		return pos, nil, true
	}
	h := make(http.Header, nlines)
	vals := make([]string, nlines)
	for i := range nlines {
		if i == host {
			continue // net/http moves Host to Request.Host
		}
		sp := c.lines[i]
		k := head[sp.name[0]:sp.name[1]]
		k, _ = canonicalKey(k) // checked above: token bytes only
		vals[i] = head[sp.value[0]:sp.value[1]]
		if old, ok := h[k]; ok {
			h[k] = append(old, vals[i])
		} else {
			h[k] = vals[i : i+1 : i+1]
		}
	}
	r := &http.Request{
		Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, Host: hostStr, Close: closeConn,
		RemoteAddr: c.remote, RequestURI: targetStr, TLS: c.tlsState,
	}
	if !c.s.lean.leanRequest(r, &c.hint) {
		return pos, nil, true
	}
	return pos, r.WithContext(c.ctx), true
}

func indexCRLF(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\n' {
			return -1 // bare LF: not ours
		}
		if b[i] == '\r' {
			if b[i+1] == '\n' {
				return i
			}
			return -1
		}
	}
	return -1
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

// equalFold compares ASCII header names or tokens case-insensitively, as
// net/http does (no Unicode folding).
func equalFold[T string | []byte](b T, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(ch byte) byte {
	if 'A' <= ch && ch <= 'Z' {
		return ch + 'a' - 'A'
	}
	return ch
}

// connectionOptions accepts Connection values made only of keep-alive and
// close; other options name hop-by-hop headers, which net/http handles.
func connectionOptions(v []byte, closeConn bool) (bool, bool) {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		tok := v[:i]
		for len(tok) > 0 && (tok[0] == ' ' || tok[0] == '\t') {
			tok = tok[1:]
		}
		for len(tok) > 0 && (tok[len(tok)-1] == ' ' || tok[len(tok)-1] == '\t') {
			tok = tok[:len(tok)-1]
		}
		switch {
		case equalFold(tok, "close"):
			closeConn = true
		case equalFold(tok, "keep-alive"), len(tok) == 0:
		default:
			return closeConn, false
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
	}
	return closeConn, true
}

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
