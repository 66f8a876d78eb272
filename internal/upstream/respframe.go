package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/previewgate/previewgate/internal/wire"
)

// shouldClose: HTTP/1.1 drops "Connection: close" from the header (and
// closes); HTTP/1.0 keeps the connection only when asked to.
func shouldClose(h http.Header, major, minor int) bool {
	conn := h["Connection"]
	hasClose := wire.ContainsToken(conn, "close")
	switch {
	case major < 1:
		return true
	case major == 1 && minor == 0:
		return hasClose || !wire.ContainsToken(conn, "keep-alive")
	case hasClose:
		delete(h, "Connection")
		return true
	}
	return false
}

// transferEncoding removes Transfer-Encoding from h and reports chunked
// coding. Only a single "chunked" coding is supported, and on HTTP/1.0 the
// header is ignored (net/http issue 12785).
func transferEncoding(h http.Header, major, minor int) (chunked bool, err error) {
	te, ok := h["Transfer-Encoding"]
	if !ok {
		return false, nil
	}
	delete(h, "Transfer-Encoding")
	if major < 1 || major == 1 && minor < 1 {
		return false, nil
	}
	if len(te) != 1 {
		return false, fmt.Errorf("too many transfer encodings: %q", te)
	}
	if !wire.EqualFold(te[0], "chunked") {
		return false, fmt.Errorf("unsupported transfer encoding: %q", te[0])
	}
	return true, nil
}

// contentLength is fixLength's check: Content-Length values must agree and
// be valid, whatever the status; duplicates of one value collapse into
// one. -1 when there is none.
func contentLength(h http.Header) (int64, error) {
	cls := h["Content-Length"]
	if len(cls) == 0 {
		return -1, nil
	}
	for _, v := range cls[1:] {
		if v != cls[0] {
			return 0, fmt.Errorf("multiple Content-Length headers: %q", cls)
		}
	}
	if len(cls) > 1 {
		h["Content-Length"] = cls[:1:1]
	}
	if cls[0] == "" {
		return 0, errors.New("empty Content-Length")
	}
	n, err := strconv.ParseUint(cls[0], 10, 63)
	if err != nil {
		return 0, fmt.Errorf("bad Content-Length %q", cls[0])
	}
	return int64(n), nil
}

// frame sets the body's kind and length from the status, the coding and
// the declared length (readTransfer's realLength), and the declared
// trailers (fixTrailer).
func (resp *Response) frame(status int, chunked bool, cl int64, isHead bool) error {
	h := resp.Header
	bodyAllowed := status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
	var length int64
	switch {
	case isHead || !bodyAllowed:
		length = 0
	case chunked:
		delete(h, "Content-Length")
		length = -1
	default:
		length = cl
	}
	resp.ContentLength = length
	if isHead {
		resp.ContentLength = cl
	}
	// Declared trailers count only with chunked coding.
	if vv, ok := h["Trailer"]; ok && chunked {
		delete(h, "Trailer")
		if err := resp.declareTrailers(vv); err != nil {
			return err
		}
	}
	switch {
	case chunked && (isHead || !bodyAllowed):
		resp.Body.kind = bodyNone
	case chunked:
		resp.Body.kind = bodyChunked
	case length == 0:
		resp.Body.kind = bodyNone
	case length > 0:
		resp.Body.kind, resp.Body.n = bodyLength, length
	default:
		// Neither length nor chunks: the body runs to EOF (RFC 9112 6.3).
		resp.Body.kind = bodyEOF
		resp.Close = true
	}
	// A 101 hands the connection to another protocol: never reuse it.
	if status == http.StatusSwitchingProtocols {
		resp.Close = true
	}
	return nil
}

// declareTrailers records the trailer keys vv declares (as net/http's
// fixTrailer: hop-by-hop and framing fields are refused).
func (resp *Response) declareTrailers(vv []string) error {
	t := make(http.Header)
	for _, v := range vv {
		for f := range strings.SplitSeq(v, ",") {
			f = wire.TrimOWS(f)
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
		resp.Trailer = t
	}
	return nil
}
