package docker

import (
	"bytes"
	"context"
	"fmt"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
	"io"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// maxTailBytes bounds a non-following read (the longest tail of 16 KiB
// chunks, and margin).
const maxTailBytes = 4 << 20

// Logs writes ctr's stdout and stderr, demultiplexed, to w: the last tail
// lines, then (follow) new output until it stops or ctx ends. A tail may
// hold several runs: a non-following read marks where the current one
// begins with a RunSeparator line (#24, 6).
func (e *Runtime) Logs(ctx context.Context, ctr string, tail int, follow bool, w io.Writer) error {
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow, Tail: strconv.Itoa(tail)}
	var split *runSplitter
	if !follow {
		if info, err := e.Lookup(ctx, ctr); err == nil && !info.StartedAt.IsZero() {
			split = &runSplitter{w: w, started: info.StartedAt}
			opts.Timestamps = true
			w = split
		}
	}
	rc, err := e.cli.ContainerLogs(ctx, ctr, opts)
	if err != nil {
		return classify("logs "+ctr, err, runtime.ErrNotFound)
	}
	defer rc.Close()
	var r io.Reader = rc
	if !follow {
		r = io.LimitReader(rc, maxTailBytes)
	}
	// No TTY, so the stream is multiplexed; the daemon frames each message
	// (16 KiB at most), which bounds stdcopy's buffer.
	_, err = stdcopy.StdCopy(w, w, r)
	if split != nil {
		split.flush()
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs %s: %w", ctr, err)
	}
	return nil
}

// RunSeparator starts the line put before the current run's output.
const RunSeparator = "----- previewgate: the app (re)started at "

// startSkew: the engine may stamp a run's first line a little before its
// recorded start, while a crash restart takes far longer than this.
const startSkew = 50 * time.Millisecond

// runSplitter strips the engine's timestamps and writes a separator
// before the current run's first line when earlier runs' lines came first.
type runSplitter struct {
	w       io.Writer
	started time.Time
	partial []byte
	earlier bool // a line of an earlier run was written
	marked  bool
}

func (s *runSplitter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.partial)+len(p) > maxTailBytes {
				p = p[:maxTailBytes-len(s.partial)]
			}
			s.partial = append(s.partial, p...)
			break
		}
		line := p[:i+1]
		if len(s.partial) > 0 {
			line = append(s.partial, line...)
			s.partial = s.partial[:0]
		}
		if err := s.line(line); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	return n, nil
}

// line writes one line without its timestamp.
func (s *runSplitter) line(l []byte) error {
	if sp := bytes.IndexByte(l, ' '); sp > 0 {
		if ts, err := time.Parse(time.RFC3339Nano, string(l[:sp])); err == nil {
			l = l[sp+1:]
			switch {
			case ts.Before(s.started.Add(-startSkew)):
				s.earlier = true
			case s.earlier && !s.marked:
				s.marked = true
				sep := RunSeparator + s.started.UTC().Format(time.RFC3339) + " -----\n"
				if _, err := io.WriteString(s.w, sep); err != nil {
					return err
				}
			}
		}
	}
	_, err := s.w.Write(l)
	return err
}

func (s *runSplitter) flush() {
	if len(s.partial) > 0 {
		_ = s.line(s.partial)
		s.partial = nil
	}
}
