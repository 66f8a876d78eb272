package docker

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// maxTailBytes bounds what a non-following read takes from the engine
// (the manager's longest tail of the log driver's 16 KiB chunks, and
// margin).
const maxTailBytes = 4 << 20

// Logs writes container ctr's stdout and stderr, demultiplexed, to w: the
// last tail lines, then (follow) new output until it stops or ctx ends.
func (e *Runtime) Logs(ctx context.Context, ctr string, tail int, follow bool, w io.Writer) error {
	rc, err := e.cli.ContainerLogs(ctx, ctr, container.LogsOptions{
		ShowStdout: true, ShowStderr: true, Follow: follow, Tail: strconv.Itoa(tail),
	})
	if err != nil {
		return classify("logs "+ctr, err, ErrNoContainer)
	}
	defer rc.Close()
	var r io.Reader = rc
	if !follow {
		r = io.LimitReader(rc, maxTailBytes)
	}
	// Containers are never created with a TTY, so the stream is always
	// multiplexed; the daemon frames each log message (16 KiB at most for
	// the json-file and local drivers), which bounds stdcopy's buffer.
	if _, err := stdcopy.StdCopy(w, w, r); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs %s: %w", ctr, err)
	}
	return nil
}
