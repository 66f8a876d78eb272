package docker

import (
	"strings"
	"testing"
	"time"
)

// TestRunSplitter: output of earlier runs is set apart from the current
// run's by one separator line, timestamps are stripped, and lines split
// across writes are joined (#24, 6).
func TestRunSplitter(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 11, 26, 19, 0, 0, 0, time.UTC)
	in := "2026-11-26T18:58:00.000000001Z run 1\n" +
		"2026-11-26T18:59:00.5Z run 2\n" +
		"2026-11-26T19:00:00.1Z run 3 a\n" +
		"2026-11-26T19:00:01Z run 3 b\n"
	tests := []struct {
		name   string
		chunks []string
		want   string
	}{
		{"three runs", []string{in},
			"run 1\nrun 2\n" + RunSeparator + "2026-11-26T19:00:00Z -----\nrun 3 a\nrun 3 b\n"},
		{"split writes", []string{in[:20], in[20:50], in[50:]},
			"run 1\nrun 2\n" + RunSeparator + "2026-11-26T19:00:00Z -----\nrun 3 a\nrun 3 b\n"},
		{"only this run", []string{"2026-11-26T19:00:00.1Z a\n2026-11-26T19:00:02Z b"}, "a\nb"},
		{"no timestamp", []string{"plain\n"}, "plain\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			s := &runSplitter{w: &b, started: started}
			for _, c := range tc.chunks {
				if _, err := s.Write([]byte(c)); err != nil {
					t.Fatal(err)
				}
			}
			s.flush()
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}
