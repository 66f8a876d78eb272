package sandboxmgr_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
)

// deleteAtVersion: a record's deletion is conditional on the version its
// deleter read. A deleter that read an older version (a re-check that
// listed the record before a DELETE wrote its removal mark) gets
// ErrConflict and the newer write stays: the mark must outlive it
// (tombstone.go). It used to delete whatever was there.
func deleteAtVersion(t *testing.T, rs records.Store, labels map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := newID()
	t.Cleanup(func() { _ = rs.DeleteRecord(context.Background(), id, "", labels) })
	v1, err := rs.PutRecord(ctx, id, "", []byte("old"), labels)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := rs.PutRecord(ctx, id, v1, []byte("mark"), labels)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.DeleteRecord(ctx, id, v1, labels); !errors.Is(err, records.ErrConflict) {
		t.Errorf("delete at the older version: got %v, want ErrConflict", err)
	}
	if list, err := rs.ListRecords(ctx, labels); err != nil || string(list[id].Data) != "mark" || list[id].Version != v2 {
		t.Fatalf("after a delete at the older version: got %q %v, want the newer write kept", list[id].Data, err)
	}
	if err := rs.DeleteRecord(ctx, id, v2, labels); err != nil {
		t.Errorf("delete at the current version: %v", err)
	}
	if list, err := rs.ListRecords(ctx, labels); err != nil || len(list) != 0 {
		t.Errorf("after a delete at the current version: got %v %v, want none", list, err)
	}
	if err := rs.DeleteRecord(ctx, id, v2, labels); err != nil {
		t.Errorf("delete of none: got %v, want nil", err)
	}
}

// The Docker runtime's records: the gateway's store in its data dir.
// The Docker runtime's records: the gateway's store in its data dir.
func TestDockerDeleteRecordAtVersion(t *testing.T) {
	t.Parallel()
	deleteAtVersion(t, dockertest.Records(t), dockertest.ScopedLabels())
}

func TestKubernetesDeleteRecordAtVersion(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	rt, err := kube.New(kube.Config{Namespace: e.ns, REST: e.rest}, e.labels)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	deleteAtVersion(t, rt, e.labels)
}
