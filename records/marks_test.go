package records_test

import (
	"context"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/records"
)

// TestRemovalMarkLifetime, on a Docker gateway's store: a DELETE's removal mark on
// a sandbox that has no container (its record looks like an orphan's)
// outlives every re-check while younger than markLife, which a wake on
// another replica needs, and goes with the first re-check after it, so
// marks do not pile up. A create's clear keeps a live mark and drops the
// settings beside it.
func TestRemovalMarkLifetime(t *testing.T) {
	store, labels := dockerStore(t)
	r := records.New(store, records.Options{Labels: labels})
	now := time.Now()
	records.SetNow(r, func() time.Time { return now })
	ctx := t.Context()
	id := dockertest.UniqueID("mark")
	t.Cleanup(func() { _ = store.DeleteRecord(context.Background(), id, "", labels) })
	// recheck is what the manager's re-check does for a sandbox that has
	// no container.
	recheck := func() {
		t.Helper()
		l, err := r.Reload(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		r.DropOrphans(ctx, l, func(string) bool { return false })
	}
	markOf := func() string {
		t.Helper()
		m, err := r.ReadMark(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	if err := r.Mark(ctx, id); err != nil {
		t.Fatal(err)
	}
	mark := markOf()
	for _, after := range []time.Duration{0, records.MarkLife(r) - time.Second} {
		now = time.Now().Add(after)
		recheck()
		if got := markOf(); got != mark || mark == "" {
			t.Fatalf("a re-check %v after the DELETE: mark %q, want %q kept", after, got, mark)
		}
	}

	// Settings beside a live mark (a record of a previous version would
	// have had none): a create's clear drops them, keeps the mark.
	yes := true
	if _, err := r.Update(ctx, id, func(s *records.Settings) error { s.Public = &yes; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := r.Clear(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	if s, err := r.Load(ctx, id); err != nil || s.Public != nil || markOf() != mark {
		t.Fatalf("after a create's clear: %+v %v, mark %q, want the mark %q alone", s, err, markOf(), mark)
	}

	now = time.Now().Add(records.MarkLife(r) + time.Second)
	recheck()
	if list, err := store.ListRecords(ctx, labels); err != nil || len(list) != 0 {
		t.Errorf("a re-check past markLife: records %v %v, want none", list, err)
	}
}
