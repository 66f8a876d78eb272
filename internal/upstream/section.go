package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/previewgate/previewgate/internal/wire"
)

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
			return nil, errBufferFull
		case err == io.EOF:
			return nil, io.ErrUnexpectedEOF
		case err != nil:
			return nil, err
		}
		want = len(buf) + 1
	}
}

var nlBytes = []byte{'\n'}

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
		line := strings.TrimSuffix(s[:nl], "\r")
		s = s[nl+1:]
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
		key, err := wire.CanonicalKey(line[:colon])
		if err != nil {
			return err
		}
		v := line[colon+1:]
		for j := 0; j < len(v); j++ {
			if c := v[j]; c < ' ' && c != '\t' || c == 0x7f {
				return fmt.Errorf("malformed header line %q", line)
			}
		}
		v = wire.TrimOWS(v)

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
