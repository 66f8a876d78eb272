package wire

import (
	"bufio"
	"net/http"
	"reflect"
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

// Both sinks hold what they were given, in order: one line per value, or
// the map's value slices.
func TestSinks(t *testing.T) {
	var b strings.Builder
	bw := bufio.NewWriter(&b)
	h := http.Header{}
	for _, s := range []interface {
		Field(k, v string)
		Fields(k string, vv []string)
	}{(*LineSink)(bw), HeaderSink(h)} {
		s.Fields("Cookie", []string{"a=1", "b=2"})
		s.Field("X-Forwarded-Proto", "https")
	}
	bw.Flush()
	if want := "Cookie: a=1\r\nCookie: b=2\r\nX-Forwarded-Proto: https\r\n"; b.String() != want {
		t.Errorf("LineSink wrote %q, want %q", b.String(), want)
	}
	if want := (http.Header{"Cookie": {"a=1", "b=2"}, "X-Forwarded-Proto": {"https"}}); !reflect.DeepEqual(h, want) {
		t.Errorf("HeaderSink holds %q, want %q", h, want)
	}
	if n := testing.AllocsPerRun(100, func() {
		bw.Reset(&b)
		var s interface{ Field(k, v string) } = (*LineSink)(bw)
		s.Field("X-Forwarded-Proto", "https")
	}); n != 0 {
		t.Errorf("LineSink.Field: %v allocs, want 0", n)
	}
}

// Edits hold MaxEdits fields: a later Set of the same field replaces its
// lines, a new field past the capacity is refused (and changes nothing),
// and Apply deletes a field whose lines are nil.
func TestEdits(t *testing.T) {
	var e Edits
	if _, ok := e.Get("Cookie"); ok {
		t.Fatal("the zero Edits has a field")
	}
	for _, k := range []string{"Cookie", "Authorization", "Referer", "Origin"} {
		if !e.Set(k, []string{k + "-1"}) {
			t.Fatalf("Set %s refused below capacity", k)
		}
	}
	if !e.Set("Cookie", nil) {
		t.Fatal("Set of a held field refused at capacity")
	}
	if e.Set("Accept", []string{"x"}) {
		t.Fatal("a fifth field was taken")
	}
	if _, ok := e.Get("Accept"); ok {
		t.Fatal("a refused field reads as edited")
	}
	if vv, ok := e.Get("Cookie"); !ok || vv != nil {
		t.Fatalf("Cookie: got %q %v, want nil lines, edited", vv, ok)
	}
	h := http.Header{"Cookie": {"a=b"}, "Referer": {"old"}, "Accept": {"*/*"}}
	e.Apply(h)
	want := http.Header{"Authorization": {"Authorization-1"}, "Referer": {"Referer-1"}, "Origin": {"Origin-1"}, "Accept": {"*/*"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("Apply: got %q, want %q", h, want)
	}
}
