package sandboxmgr

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
)

// lockedBuffer is a bytes.Buffer safe for a logger and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestOrphanDropStopsAtDeadline, on the real engine: the re-check's drop
// of orphan records stops when the re-check's deadline (RecheckEvery)
// has passed, and leaves the rest to the next re-check. Orphans can be
// many: every DELETE, of any id, leaves a record for markLife, and a
// backend with an API token can DELETE ids as fast as it likes (a few
// hundred a second on one engine; one delete takes ~5 ms). It used to go
// on calling the runtime for each one with the expired context, logging a
// warning per record left, every re-check: thousands of lines every 5 s.
func TestOrphanDropStopsAtDeadline(t *testing.T) {
	dockertest.Client(t) // skips under -short
	rt, err := docker.New(docker.Options{DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rs := dockertest.Records(t)
	m := newManager(Config{Labels: dockertest.ScopedLabels(), RecheckEvery: -1, ReapEvery: -1, Records: rs}, log, rt)
	defer m.Close()
	ctx := t.Context()
	const n = 8
	for i := range n {
		id := dockertest.UniqueID("orphan")
		if _, err := rs.PutRecord(ctx, id, "", []byte(`{"public":true}`), m.recordLabels(id)); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	recorded, err := m.reloadRecords(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recorded) != n {
		t.Fatalf("records listed: got %d, want %d", len(recorded), n)
	}

	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	m.dropOrphanRecords(expired, recorded, nil)
	if got := strings.Count(logs.String(), "remove sandbox settings"); got > 1 {
		t.Errorf("orphan drop past the re-check's deadline: got %d warnings (one per record), want at most 1:\n%s", got, logs.String())
	}

	// The next re-check, in time, drops them all.
	m.dropOrphanRecords(ctx, recorded, nil)
	if list, err := rs.ListRecords(ctx, m.createLabels()); err != nil || len(list) != 0 {
		t.Errorf("after an orphan drop in time: %d records left (%v), want none", len(list), err)
	}
}
