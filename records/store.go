package records

import (
	"context"
	"errors"
)

// Store keeps one small record per sandbox where every replica of a
// deployment and a restarted gateway see it, never in a replica's memory
// alone. Kubernetes keeps each as a ConfigMap (sandboxmgr/kube/records.go);
// a Docker engine, served by one gateway per scope, in that gateway's data
// dir (internal/boltstore). A record is opaque bytes here, at most
// MaxRecord of them; its meaning is this package's (stored.go).
//
// An implementation MUST:
//   - return from ListRecords every record carrying all of labels, the
//     newest version of each, by sandbox id;
//   - write in PutRecord only if the record's current version is still
//     prev ("": there is none yet), and otherwise fail with ErrConflict,
//     touching nothing: two writers never both win, and no write is lost
//     or applied twice;
//   - fail PutRecord with ErrRecordSize when data passes MaxRecord;
//   - delete in DeleteRecord only a record carrying labels, only at
//     version prev ("": whatever it is), nil if there is none, ErrConflict
//     if another writer came first (the record then stays as that writer
//     made it);
//   - honor ctx, and wrap the runtime's unavailability so callers can
//     retry later.
//
// Each store's own tests check these (sandboxmgr/kube, internal/boltstore).
type Store interface {
	ListRecords(ctx context.Context, labels map[string]string) (map[string]Record, error)
	PutRecord(ctx context.Context, id, prev string, data []byte, labels map[string]string) (version string, err error)
	DeleteRecord(ctx context.Context, id, prev string, labels map[string]string) error
}

// Record is one sandbox's record as stored.
type Record struct {
	Data    []byte
	Version string // opaque; PutRecord's prev
}

// MaxRecord bounds a record's bytes: far under a ConfigMap's 1 MiB, and
// room for MaxLinks links with 512-byte paths.
const MaxRecord = 32 << 10

// LabelRecord marks a record with its sandbox id.
const LabelRecord = "previewgate.record"

// Name is the object name of sandbox id's record (a ConfigMap).
func Name(id string) string { return "previewgate-rec-" + id }

var (
	// ErrConflict: a record changed since it was read.
	ErrConflict = errors.New("record changed meanwhile")
	// ErrForeignRecord: the record's name is taken by another gateway
	// scope's record, in a store that names records by sandbox id alone
	// (Kubernetes). Retrying cannot help; removing that record can.
	ErrForeignRecord = errors.New("record name taken by another gateway scope's record")
	// ErrRecordSize: a record passes MaxRecord.
	ErrRecordSize = errors.New("record too large")
	// ErrNoRecords: no store keeps records (a test's manager).
	ErrNoRecords = errors.New("this runtime keeps no per-sandbox settings")
)
