package wire

import (
	"bufio"
	"net/http"
	"slices"
	"strings"
)

// ConnectionTokens lists, canonicalized, sorted and without repeats, the
// headers that h's Connection header marks as hop-by-hop (computed once
// per message, not per header). Sorted, so that HopByHop stays
// logarithmic however many tokens a hostile peer sends: a 64 KiB
// Connection header and a 64 KiB head of other fields would otherwise
// cost their product.
func ConnectionTokens(h http.Header) []string {
	var out []string
	for _, line := range h["Connection"] {
		for _, tok := range strings.Split(line, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				out = append(out, http.CanonicalHeaderKey(tok))
			}
		}
	}
	if len(out) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

// HopByHop reports headers that belong to one connection, not the message
// (RFC 9110 7.6.1), given the message's ConnectionTokens.
func HopByHop(k string, conn []string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	_, found := slices.BinarySearch(conn, k)
	return found
}

// HeaderSink and LineSink take the fields of a message head as a caller
// builds it, field by field: HeaderSink into a header map (one value
// slice per Field), LineSink as HTTP/1.1 header lines on a buffered
// writer, with no allocation. Both are pointer-shaped, so handing either
// to an interface allocates nothing. Neither checks a field: the caller
// passes names and values it has validated (a parsed request's).
type HeaderSink http.Header

func (h HeaderSink) Field(k, v string)            { h[k] = []string{v} }
func (h HeaderSink) Fields(k string, vv []string) { h[k] = vv }

// LineSink: see HeaderSink.
type LineSink bufio.Writer

func (w *LineSink) Field(k, v string) {
	bw := (*bufio.Writer)(w)
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

func (w *LineSink) Fields(k string, vv []string) {
	for _, v := range vv {
		w.Field(k, v)
	}
}

// Edits are new lines for a few fields of a request's head, kept without
// a map, so that a proxy that writes the head itself allocates nothing
// for them (#25): the fields the gateway strips tokens from and the local
// host mode's Origin. Nil lines mean the field is not sent. It holds
// MaxEdits fields; the zero value holds none.
type Edits struct {
	n    int
	keys [MaxEdits]string
	vals [MaxEdits][]string
}

// MaxEdits is how many fields Edits holds.
const MaxEdits = 4

// Set makes vv field k's lines. It reports false, changing nothing, when
// k is new and MaxEdits fields are set already.
func (e *Edits) Set(k string, vv []string) bool {
	for i := range e.n {
		if e.keys[i] == k {
			e.vals[i] = vv
			return true
		}
	}
	if e.n == MaxEdits {
		return false
	}
	e.keys[e.n], e.vals[e.n] = k, vv
	e.n++
	return true
}

// Get returns field k's new lines, and whether k is edited.
func (e *Edits) Get(k string) ([]string, bool) {
	for i := range e.n {
		if e.keys[i] == k {
			return e.vals[i], true
		}
	}
	return nil, false
}

// Apply writes the edits into h: a field with nil lines is deleted.
func (e *Edits) Apply(h http.Header) {
	for i := range e.n {
		if e.vals[i] == nil {
			delete(h, e.keys[i])
		} else {
			h[e.keys[i]] = e.vals[i]
		}
	}
}
