package wire

import (
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
