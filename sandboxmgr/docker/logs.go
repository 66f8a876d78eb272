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

// maxTailBytes bounds what a non-following read takes from the engine
// (the manager's longest tail of the log driver's 16 KiB chunks, and
// margin).
const maxTailBytes = 4 << 20

// Logs writes container ctr's stdout and stderr, demultiplexed, to w: the
// last tail lines, then (follow) new output until it stops or ctx ends.
// A container keeps its output across starts, so a tail may hold several
// runs: a non-following read marks where the current run begins with a
// RunSeparator line (#24, 6: a failure answer mixed three runs' lines).
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
	// Containers are never created with a TTY, so the stream is always
	// multiplexed; the daemon frames each log message (16 KiB at most for
	// the json-file and local drivers), which bounds stdcopy's buffer.
	_, err = stdcopy.StdCopy(w, w, r)
	if split != nil {
		split.flush()
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs %s: %w", ctr, err)
	}
	return nil
}

// RunSeparator starts the line put between the output of earlier runs of a
// container and that of its current run.
const RunSeparator = "----- previewgate: the app (re)started at "

// startSkew: the engine can stamp the first line of a run a little before
// the start time it records (the app writes before the start is noted),
// while a restart after a crash takes far longer than this (CI saw an app
// that prints at once lose its separator).
const startSkew = 50 * time.Millisecond

// runSplitter takes log lines with the engine's timestamps, strips them,
// and writes a separator before the first line of the run that started at
// started when lines of earlier runs came before it.
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

// line writes one line (with its newline, if it had one) without its
// timestamp.
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
