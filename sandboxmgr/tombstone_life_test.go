package sandboxmgr

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestRemovalMarkLifetime, on the real engine: a DELETE's removal mark on
// a sandbox that has no container (its record looks like an orphan's)
// outlives every re-check while younger than markLife, which a wake on
// another replica needs, and goes with the first re-check after it, so
// marks do not pile up. A create's clear keeps a live mark and drops the
// settings beside it.
func TestRemovalMarkLifetime(t *testing.T) {
	dockertest.Client(t) // skips under -short
	rt, err := docker.New(docker.Options{DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rs := dockertest.Records(t)
	m := newManager(Config{Labels: dockertest.ScopedLabels(), RecheckEvery: -1, ReapEvery: -1, Records: rs}, nil, rt)
	defer m.Close()
	now := time.Now()
	m.now = func() time.Time { return now } // no background loop runs: Start is not called
	ctx := t.Context()
	id := dockertest.UniqueID("mark")
	stored := func() (storedRecord, bool) {
		t.Helper()
		list, err := rs.ListRecords(ctx, m.createLabels())
		if err != nil {
			t.Fatal(err)
		}
		rec, ok := list[id]
		var s storedRecord
		if ok {
			if err := json.Unmarshal(rec.Data, &s); err != nil {
				t.Fatal(err)
			}
		}
		return s, ok
	}

	if err := m.markRemoved(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{0, m.markLife() - time.Second} {
		now = time.Now().Add(after)
		if err := m.recheck(ctx); err != nil {
			t.Fatal(err)
		}
		if s, ok := stored(); !ok || s.Removed == nil {
			t.Fatalf("a re-check %v after the DELETE: record %+v (there: %v), want the removal mark kept", after, s, ok)
		}
	}

	// Settings beside a live mark (a record of a previous version would
	// have had none): a create's clear drops them, keeps the mark.
	s, _ := stored()
	yes := true
	s.Public = &yes
	cur, err := m.loadRecord(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.putRecord(ctx, id, cur.version, s); err != nil {
		t.Fatal(err)
	}
	if err := m.clearRecord(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	if got, ok := stored(); !ok || got.Removed == nil || got.Removed.ID != s.Removed.ID || got.Public != nil {
		t.Fatalf("after a create's clear: %+v (there: %v), want the mark alone", got, ok)
	}

	now = time.Now().Add(m.markLife() + time.Second)
	if err := m.recheck(ctx); err != nil {
		t.Fatal(err)
	}
	if s, ok := stored(); ok {
		t.Errorf("a re-check past markLife: record %+v, want it gone", s)
	}
}

// TestRecordWithoutMark: a record written before removal marks existed
// decodes as before (its settings, no mark), and one with a mark keeps
// its settings readable.
func TestRecordWithoutMark(t *testing.T) {
	m := newManager(Config{}, nil, newFake())
	defer m.Close()
	old := `{"public":true,"links":[{"id":"l1","digest":"d","path":"/","created":"2026-01-01T00:00:00Z","expires":"2026-01-02T00:00:00Z"}]}`
	cr := decodeRecord(m, "a", runtime.Record{Data: []byte(old), Version: "3"}, time.Now())
	if cr.s.Public == nil || !*cr.s.Public || len(cr.s.Links) != 1 || cr.removed != nil || cr.version != "3" {
		t.Errorf("an old record: got %+v, want public, one link, no mark", cr)
	}
	marked := `{"public":true,"removed":{"id":"x1","at":"2026-01-01T00:00:00Z"}}`
	cr = decodeRecord(m, "a", runtime.Record{Data: []byte(marked)}, time.Now())
	if cr.s.Public == nil || cr.removed == nil || cr.removed.ID != "x1" {
		t.Errorf("a marked record: got %+v, want public and mark x1", cr)
	}
}
