package wire

import (
	"net/http"
	"strings"
	"testing"
)

// The tokens of every Connection line count, canonicalized and in any
// order or repetition; HopByHop knows the fixed list and the tokens.
func TestHopByHop(t *testing.T) {
	h := http.Header{"Connection": {"x-b, keep-alive", " X-A ,x-b,,"}}
	conn := ConnectionTokens(h)
	for _, k := range []string{"X-A", "X-B", "Keep-Alive", "Connection", "Te", "Upgrade"} {
		if !HopByHop(k, conn) {
			t.Errorf("%s: not hop-by-hop with tokens %q", k, conn)
		}
	}
	for _, k := range []string{"X-C", "Content-Type", "X-Request-Id"} {
		if HopByHop(k, conn) {
			t.Errorf("%s: hop-by-hop with tokens %q", k, conn)
		}
	}
	// Many tokens, many repeats: each distinct one found, the list bounded
	// by the distinct ones.
	var b strings.Builder
	for i := range 5000 {
		b.WriteString("x-t" + string(rune('a'+i%26)) + ",")
	}
	conn = ConnectionTokens(http.Header{"Connection": {b.String()}})
	if len(conn) != 26 || !HopByHop("X-Tz", conn) || HopByHop("X-U", conn) {
		t.Errorf("got %d tokens, want the 26 distinct ones", len(conn))
	}
}
