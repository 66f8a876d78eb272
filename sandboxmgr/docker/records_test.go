package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestRecordLostUpdate: writer A checked that version 1 is the newest;
// before its create, B wrote version 2 and C version 3 (removing 2). A's
// create of version 2 then finds the name free: it must report a
// conflict, not succeed with a write every reader ignores (a revoke or
// "public": false lost while the API said done).
func TestRecordLostUpdate(t *testing.T) {
	dockertest.Client(t) // skips under -short
	e, err := New(Options{DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, labels := dockertest.UniqueID("rec"), dockertest.ScopedLabels()
	labels[records.LabelRecord] = id
	t.Cleanup(func() { _ = e.DeleteRecord(context.Background(), id, "", labels) })
	if _, err := e.PutRecord(ctx, id, "", []byte("v1"), labels); err != nil {
		t.Fatal(err)
	}
	beforeRecordCreate = func() {
		beforeRecordCreate = nil
		if v, err := e.PutRecord(ctx, id, "1", []byte("B"), labels); err != nil || v != "2" {
			t.Errorf("B: %q %v", v, err)
		}
		if v, err := e.PutRecord(ctx, id, "2", []byte("C"), labels); err != nil || v != "3" {
			t.Errorf("C: %q %v", v, err)
		}
	}
	defer func() { beforeRecordCreate = nil }()
	if v, err := e.PutRecord(ctx, id, "1", []byte("A"), labels); !errors.Is(err, records.ErrConflict) {
		t.Errorf("A's write over a stale version: got %q %v, want ErrConflict", v, err)
	}
	list, err := e.ListRecords(ctx, labels)
	if err != nil {
		t.Fatal(err)
	}
	if got := list[id]; string(got.Data) != "C" || got.Version != "3" {
		t.Errorf("record: got %q version %s, want C version 3", got.Data, got.Version)
	}
	if v, err := e.PutRecord(ctx, id, "3", []byte("D"), labels); err != nil || v != "4" {
		t.Errorf("the next write: got %q %v, want version 4", v, err)
	}
}

// TestRecordNameOfAnotherScope: a record volume of another gateway scope
// (left when that gateway's container was removed by hand) holds the name
// of the version this gateway writes next. The write reported a conflict,
// which the manager retried and the admin API answered 503 "retry" on
// every try, for ever; it must say whose record is in the way.
func TestRecordNameOfAnotherScope(t *testing.T) {
	dockertest.Client(t) // skips under -short
	e, err := New(Options{DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := dockertest.UniqueID("rec")
	theirs, ours := dockertest.ScopedLabels(), dockertest.ScopedLabels()
	theirs[runtime.LabelInstance] = "other-scope"
	t.Cleanup(func() {
		_ = e.DeleteRecord(context.Background(), id, "", theirs)
		_ = e.DeleteRecord(context.Background(), id, "", ours)
	})
	if _, err := e.PutRecord(ctx, id, "", []byte("theirs"), theirs); err != nil {
		t.Fatal(err)
	}
	v, err := e.PutRecord(ctx, id, "", []byte("ours"), ours)
	if !errors.Is(err, records.ErrForeignRecord) || !strings.Contains(err.Error(), records.Name(id)+"-1") || !strings.Contains(err.Error(), "other-scope") {
		t.Fatalf("got %q %v, want ErrForeignRecord naming the volume and its scope", v, err)
	}
	if list, err := e.ListRecords(ctx, ours); err != nil || len(list) != 0 {
		t.Errorf("our records: got %v %v, want none", list, err)
	}
}
