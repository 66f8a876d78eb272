package runtime

import (
	"context"
	"errors"
)

// Records keep one small record per sandbox (its settings and share
// links, and a DELETE's removal mark: sandboxmgr/tombstone.go) where
// every replica of a deployment and a restarted gateway see it, never in a
// replica's memory alone. Kubernetes keeps it as a ConfigMap
// (sandboxmgr/kube/records.go); a Docker engine, served by one gateway per
// scope, in that gateway's data dir (internal/boltstore). A record is
// opaque bytes here, at most MaxRecord of them.
type Records interface {
	// ListRecords returns every record carrying all of labels, by
	// sandbox id.
	ListRecords(ctx context.Context, labels map[string]string) (map[string]Record, error)
	// PutRecord writes sandbox id's record if its current version is
	// still prev ("": there is none yet), labelled with labels, and
	// returns the new version; ErrConflict if another writer came first,
	// ErrRecordSize if data passes MaxRecord.
	PutRecord(ctx context.Context, id, prev string, data []byte, labels map[string]string) (version string, err error)
	// DeleteRecord removes every version of id's record carrying labels
	// if its current version is still prev ("": whatever it is); nil if
	// there is none, ErrConflict if another writer came first (the record
	// is then left as that writer made it).
	DeleteRecord(ctx context.Context, id, prev string, labels map[string]string) error
}

// Record is one sandbox's record as stored.
type Record struct {
	Data    []byte
	Version string // opaque; PutRecord's prev
}

// MaxRecord bounds a record's bytes: far under what a ConfigMap takes
// (1 MiB), and room for the manager's 32 links with 512-byte paths.
const MaxRecord = 32 << 10

// LabelRecord marks a record with its sandbox id.
const LabelRecord = "previewgate.record"

// RecordName is the object name of sandbox id's record (a ConfigMap).
func RecordName(id string) string { return "previewgate-rec-" + id }

var (
	// ErrConflict: a record changed since it was read.
	ErrConflict = errors.New("record changed meanwhile")
	// ErrForeignRecord: the record's name is taken by a record of another
	// gateway scope (one left behind when its sandbox's container was
	// removed by hand). Retrying cannot help; removing that record can.
	ErrForeignRecord = errors.New("record name taken by another gateway scope's record")
	// ErrRecordSize: a record passes MaxRecord.
	ErrRecordSize = errors.New("record too large")
)
