package records_test

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
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

// dockerStore is a Docker gateway's store (bbolt in its data dir) and a
// scope of the test's own.
func dockerStore(t *testing.T) (records.Store, map[string]string) {
	t.Helper()
	return dockertest.Records(t), runtime.Scoped(dockertest.ScopedLabels())
}

// TestOrphanDropStopsAtDeadline, on a Docker gateway's store: the re-check's drop
// of orphan records stops when the re-check's deadline (RecheckEvery)
// has passed, and leaves the rest to the next re-check. Orphans can be
// many: every DELETE, of any id, leaves a record for markLife, and a
// backend with an API token can DELETE ids as fast as it likes (a few
// hundred a second on one engine; one delete takes ~5 ms). It used to go
// on calling the runtime for each one with the expired context, logging a
// warning per record left, every re-check: thousands of lines every 5 s.
func TestOrphanDropStopsAtDeadline(t *testing.T) {
	store, labels := dockerStore(t)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := records.New(store, records.Options{Labels: labels, Log: log})
	ctx := t.Context()
	const n = 8
	for i := range n {
		id := dockertest.UniqueID("orphan")
		t.Cleanup(func() { _ = store.DeleteRecord(context.Background(), id, "", labels) })
		l := maps.Clone(labels)
		l[records.LabelRecord] = id
		if _, err := store.PutRecord(ctx, id, "", []byte(`{"public":true}`), l); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	listed, err := r.Reload(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := records.Listed(listed); got != n {
		t.Fatalf("records listed: got %d, want %d", got, n)
	}

	gone := func(string) bool { return false }
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	r.DropOrphans(expired, listed, gone)
	if got := strings.Count(logs.String(), "remove sandbox settings"); got > 1 {
		t.Errorf("orphan drop past the re-check's deadline: got %d warnings (one per record), want at most 1:\n%s", got, logs.String())
	}

	// The next re-check, in time, drops them all.
	r.DropOrphans(ctx, listed, gone)
	if list, err := store.ListRecords(ctx, labels); err != nil || len(list) != 0 {
		t.Errorf("after an orphan drop in time: %d records left (%v), want none", len(list), err)
	}
}
