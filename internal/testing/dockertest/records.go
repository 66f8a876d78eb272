package dockertest

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/previewgate/previewgate/internal/boltstore"
	"github.com/previewgate/previewgate/records"
)

// Records opens a records store in a directory of t's own, closed when t
// ends: what the serve wiring gives a Docker gateway's manager
// (records.New over it), since the engine keeps no records.
func Records(t testing.TB) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(context.Background(), t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("records store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// FailingRecords passes every call on to its Store until Fail(true),
// then fails every call until Fail(false): a records store whose disk
// broke, for tests of what still works while records fail.
type FailingRecords struct {
	records.Store
	down atomic.Bool
}

// Fail turns the failure on or off.
func (f *FailingRecords) Fail(on bool) { f.down.Store(on) }

var errRecordsDown = errors.New("records refused by the test")

func (f *FailingRecords) ListRecords(ctx context.Context, labels map[string]string) (map[string]records.Record, error) {
	if f.down.Load() {
		return nil, errRecordsDown
	}
	return f.Store.ListRecords(ctx, labels)
}

func (f *FailingRecords) PutRecord(ctx context.Context, id, prev string, data []byte, labels map[string]string) (string, error) {
	if f.down.Load() {
		return "", errRecordsDown
	}
	return f.Store.PutRecord(ctx, id, prev, data, labels)
}

func (f *FailingRecords) DeleteRecord(ctx context.Context, id, prev string, labels map[string]string) error {
	if f.down.Load() {
		return errRecordsDown
	}
	return f.Store.DeleteRecord(ctx, id, prev, labels)
}
