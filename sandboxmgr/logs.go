package sandboxmgr

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A sandbox's output is hostile (#16): escapes, control characters,
// invalid UTF-8, markup, lines of any length. All the manager hands out of
// it went through logLines: one line per element, no control characters
// or escapes, valid UTF-8, at most LogLineMax runes, never more lines than
// asked. Callers still escape it for their medium.
const (
	// LogTailLines is how many lines a failed wake records and the
	// waiting page shows.
	LogTailLines = 40
	// LogLineMax bounds a line in runes; longer ones are cut with "…".
	LogLineMax = 200
	// MaxLogLines bounds any tail the manager returns.
	MaxLogLines = 1000
	// maxRawLine bounds the bytes buffered for one line before it is
	// sanitized; the rest, up to the next newline, is dropped.
	maxRawLine = 16 << 10
)

// ErrNoLogs: the container runtime cannot read container output.
var ErrNoLogs = errors.New("container logs not supported by this runtime")

// TailLogs returns the last tail lines (1 to MaxLogLines) of instance
// inst's output, sanitized; ErrNoLogs if le is nil, runtime.ErrNotFound
// if it is gone.
func TailLogs(ctx context.Context, le runtime.Logs, inst string, tail int) ([]string, error) {
	tail = min(max(tail, 1), MaxLogLines)
	if le == nil {
		return nil, ErrNoLogs
	}
	lw := newLogLines(tail, nil)
	if err := le.Logs(ctx, inst, tail, false, lw); err != nil {
		return nil, err
	}
	return lw.Lines(), nil
}

// FollowLogs calls fn, on the caller's goroutine, with each sanitized line
// of inst's output: the last tail lines (0 to MaxLogLines), then new ones
// until the instance stops, ctx ends (nil) or fn fails (its error).
func FollowLogs(ctx context.Context, le runtime.Logs, inst string, tail int, fn func(line string) error) error {
	tail = min(max(tail, 0), MaxLogLines)
	if le == nil {
		return ErrNoLogs
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lw := newLogLines(1, func(line string) {
		if err := fn(line); err != nil {
			cancel(err)
		}
	})
	err := le.Logs(ctx, inst, tail, true, lw)
	lw.Flush()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause // fn's error
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// watchLogs follows ctr's output while sb wakes, keeping its last
// LogTailLines for Progress. stop ends the follow and waits for it.
func (m *Manager) watchLogs(ctx context.Context, sb *sandbox, ctr string) (stop func()) {
	le := m.caps.Logs
	if le == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var lw *logLines
	lw = newLogLines(LogTailLines, func(string) { sb.diag.logs.Store(new(lw.linesLocked())) })
	go func() {
		defer close(done)
		_ = le.Logs(ctx, ctr, LogTailLines, true, lw) // best effort: the page shows what came
		lw.Flush()
	}()
	return func() { cancel(); <-done }
}

// diag is what the waiting page shows of a sandbox's wake besides its
// phase.
type diag struct {
	logs      atomic.Pointer[[]string]
	wakeStart atomic.Int64 // unix nanoseconds
	template  atomic.Pointer[string]
	// failed is the last failed start (failure.go), kept until a wake
	// succeeds.
	failed atomic.Pointer[Failure]
}

// logLines is an io.Writer that splits output into sanitized lines and
// keeps the last n; onLine, if set, is called (with mu held) for each.
type logLines struct {
	mu      sync.Mutex // guards everything below
	n       int
	ring    []string
	partial []byte
	cut     bool // the partial line was cut at maxRawLine
	onLine  func(string)
}

func newLogLines(n int, onLine func(string)) *logLines {
	return &logLines{n: n, onLine: onLine}
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := 0
		for i < len(p) && p[i] != '\n' {
			i++
		}
		if room := maxRawLine - len(l.partial); room > 0 {
			l.partial = append(l.partial, p[:min(i, room)]...)
			if i > room {
				l.cut = true
			}
		} else if i > 0 {
			l.cut = true
		}
		if i == len(p) {
			break
		}
		l.endLocked()
		p = p[i+1:]
	}
	return n, nil
}

// Flush ends a last line that had no newline.
func (l *logLines) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.endLocked()
	}
}

func (l *logLines) endLocked() {
	line := SanitizeLine(string(l.partial), LogLineMax)
	if l.cut && !strings.HasSuffix(line, "…") {
		line += "…"
	}
	l.partial, l.cut = l.partial[:0], false
	if len(l.ring) == l.n {
		l.ring = append(l.ring[:0], l.ring[1:]...)
	}
	l.ring = append(l.ring, line)
	if l.onLine != nil {
		l.onLine(line)
	}
}

// Lines returns a copy of the kept lines.
func (l *logLines) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.linesLocked()
}

// linesLocked returns a copy of the kept lines. l.mu must be held.
func (l *logLines) linesLocked() []string {
	return append([]string(nil), l.ring...)
}

// SanitizeLine makes one line of hostile output safe to show as text:
// what follows the last carriage return, without escape sequences,
// control or bidi characters, invalid UTF-8 or tabs, cut at max runes
// with "…". It does not escape for any markup.
func SanitizeLine(s string, max int) string {
	if i := strings.LastIndexByte(strings.TrimRight(s, "\r"), '\r'); i >= 0 {
		s = s[i+1:]
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(s) && n < max+1; {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0x1b { // ESC: skip the whole sequence
			i += escapeLen(s[i:])
			continue
		}
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			r = '\uFFFD'
		case r == '\t':
			r = ' '
		case unicode.IsControl(r), isBidiControl(r):
			continue
		}
		b.WriteRune(r)
		n++
	}
	out := strings.TrimRight(b.String(), " ")
	if n > max {
		rs := []rune(out)
		out = string(rs[:min(max-1, len(rs))]) + "…"
	}
	return out
}

// escapeLen is the length of the escape sequence at the start of s: CSI
// to its final byte, OSC/DCS/APC/PM/SOS to BEL or ST, else two.
func escapeLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[':
		for i := 2; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return len(s)
	case ']', 'P', '_', '^', 'X':
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	_, size := utf8.DecodeRuneInString(s[1:])
	return 1 + size
}

// isBidiControl reports characters that reorder text (a line could make
// another look like something it is not).
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}
