package sandboxmgr

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitizeLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		max            int
	}{
		{name: "plain", in: "Error: Cannot find module './missing'", want: "Error: Cannot find module './missing'"},
		{name: "color", in: "\x1b[31mError\x1b[0m: boom", want: "Error: boom"},
		{name: "csi with params", in: "\x1b[1;38;5;196mred\x1b[K", want: "red"},
		{name: "osc title bel", in: "\x1b]0;evil title\x07after", want: "after"},
		{name: "osc hyperlink st", in: "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", want: "link"},
		{name: "carriage return progress", in: "10%\r50%\r100%", want: "100%"},
		{name: "trailing cr", in: "done\r", want: "done"},
		{name: "controls", in: "a\x00b\x07c\x08d\x7fe\u0085f", want: "abcdef"},
		{name: "bidi override", in: "abc\u202edcba", want: "abcdcba"},
		{name: "tab", in: "a\tb", want: "a b"},
		{name: "invalid utf8", in: "a\xffb", want: "a\uFFFDb"},
		{name: "markup kept as text", in: "<script>alert(1)</script>", want: "<script>alert(1)</script>"},
		{name: "cut", in: strings.Repeat("x", 30), max: 10, want: strings.Repeat("x", 9) + "…"},
		{name: "exactly max", in: strings.Repeat("é", 10), max: 10, want: strings.Repeat("é", 10)},
		{name: "lone esc", in: "a\x1b", want: "a"},
		{name: "unterminated csi", in: "a\x1b[31", want: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			max := tc.max
			if max == 0 {
				max = LogLineMax
			}
			got := SanitizeLine(tc.in, max)
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if n := utf8.RuneCountInString(got); n > max {
				t.Errorf("got %d runes, want at most %d", n, max)
			}
		})
	}
}

func FuzzSanitizeLine(f *testing.F) {
	f.Add("\x1b[31mError\x1b[0m\r\n\x00<b>")
	f.Fuzz(func(t *testing.T, s string) {
		got := SanitizeLine(s, 50)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > 50 {
			t.Fatalf("got %q: invalid or too long", got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || isBidiControl(r) {
				t.Fatalf("got %q: contains %U", got, r)
			}
		}
	})
}

// logLines keeps the last n lines, whatever the write boundaries, and
// bounds a line that never ends.
func TestLogLines(t *testing.T) {
	t.Parallel()
	var seen []string
	l := newLogLines(3, func(s string) { seen = append(seen, s) })
	for _, chunk := range []string{"one\ntw", "o\n", "three\nfour\nfi", "ve"} {
		l.Write([]byte(chunk))
	}
	if got, want := l.Lines(), []string{"two", "three", "four"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	l.Flush()
	if got, want := l.Lines(), []string{"three", "four", "five"}; !slices.Equal(got, want) {
		t.Errorf("after flush got %q, want %q", got, want)
	}
	if len(seen) != 5 {
		t.Errorf("got %d lines reported, want 5", len(seen))
	}

	// A line of 1 MiB without newline, written in pieces: buffered up to
	// maxRawLine only, cut to LogLineMax.
	l = newLogLines(2, nil)
	for range 64 {
		l.Write([]byte(strings.Repeat("y", 16<<10)))
	}
	if len(l.partial) > maxRawLine {
		t.Errorf("got %d bytes buffered, want at most %d", len(l.partial), maxRawLine)
	}
	l.Write([]byte("\nnext\n"))
	got := l.Lines()
	if len(got) != 2 || utf8.RuneCountInString(got[0]) != LogLineMax || !strings.HasSuffix(got[0], "…") || got[1] != "next" {
		t.Errorf("got %d lines %.40q…, want a cut line then next", len(got), fmt.Sprint(got))
	}
}
