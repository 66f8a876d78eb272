package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Records on the Docker Engine (records.Store). The engine has no
// key-value store, and a container's labels cannot change, so a sandbox's
// record is a labelled volume that is never mounted: its labels carry the
// sandbox id, the version and the data, and every replica reads them all
// with one filtered VolumeList (scoped by the gateway's labels, as its
// containers are). A change creates version n+1, named
// previewgate-rec-<id>-<n+1>, then removes the older ones; readers take
// the newest. The volume name is unique on the engine, so it is the lock
// between two replicas writing the same version: the loser finds the
// winner's nonce on the volume it got back and reports ErrConflict.
// Each version also carries its lineage, its own nonce and its
// ancestors' (the last maxLineage): a writer that finds a newer version
// right after its create tells a write built on its own (done) from one
// that was newer before it (its create landed in a gap another writer's
// remove made: ErrConflict), so a write is neither lost nor applied twice.
// A writer that dies between create and remove leaves an older version
// that readers ignore and the next write removes.
const (
	labelRecordVersion = "previewgate.record.version"
	labelRecordData    = "previewgate.record.data"
	labelRecordNonce   = "previewgate.record.nonce"
	labelRecordLineage = "previewgate.record.lineage"
)

// maxLineage is how many writes a version's lineage remembers: a writer
// slower than that many writes after its own gets ErrConflict though its
// write was kept (applied twice on retry), so it is far above the writes
// one change can see (a few per sandbox per second).
const maxLineage = 16

// beforeRecordCreate, if set (tests only), runs between PutRecord's check
// of the newest version and its create.
var beforeRecordCreate func()

// ListRecords returns the newest version of every record carrying labels.
func (e *Runtime) ListRecords(ctx context.Context, labels map[string]string) (map[string]records.Record, error) {
	vols, err := e.recordVolumes(ctx, labels, "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]records.Record)
	best := make(map[string]int)
	for _, v := range vols {
		id, n := v.Labels[records.LabelRecord], versionOf(v)
		if n <= 0 || id == "" {
			continue
		}
		if cur, ok := best[id]; ok && cur >= n {
			continue
		}
		best[id] = n
		out[id] = records.Record{Data: []byte(v.Labels[labelRecordData]), Version: strconv.Itoa(n)}
	}
	return out, nil
}

// PutRecord creates version prev+1 of id's record and removes the older.
func (e *Runtime) PutRecord(ctx context.Context, id, prev string, data []byte, labels map[string]string) (string, error) {
	if len(data) > records.MaxRecord {
		return "", fmt.Errorf("record %s: %w", id, records.ErrRecordSize)
	}
	n := 0
	if prev != "" {
		var err error
		if n, err = strconv.Atoi(prev); err != nil || n <= 0 {
			return "", fmt.Errorf("record %s: bad version %q", id, prev)
		}
	}
	// The newest version must still be prev: a reader that missed a
	// write must not write over it with an older view.
	vols, err := e.recordVolumes(ctx, labels, id)
	if err != nil {
		return "", err
	}
	lineage := ""
	for _, v := range vols {
		if versionOf(v) > n {
			return "", fmt.Errorf("record %s: %w", id, records.ErrConflict)
		}
		if versionOf(v) == n {
			lineage = v.Labels[labelRecordLineage]
		}
	}
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	l[records.LabelRecord] = id
	l[labelRecordVersion] = strconv.Itoa(n + 1)
	l[labelRecordData] = string(data)
	l[labelRecordNonce] = hex.EncodeToString(nonce)
	l[labelRecordLineage] = extendLineage(l[labelRecordNonce], lineage)
	name := records.Name(id) + "-" + strconv.Itoa(n+1)
	if beforeRecordCreate != nil {
		beforeRecordCreate()
	}
	got, err := e.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Driver: "local", Labels: l})
	if err != nil {
		return "", classify("create record "+name, err, nil)
	}
	if got.Labels[labelRecordNonce] != l[labelRecordNonce] {
		// The engine answered the volume another writer made first: a
		// replica of this gateway (read again and retry), or a gateway of
		// another scope, whose record no retry gets past.
		if !hasLabels(got.Labels, labels) {
			return "", fmt.Errorf("record %s: volume %s (scope %q): %w; remove it if that gateway no longer needs sandbox %s",
				id, name, got.Labels[runtime.LabelInstance], records.ErrForeignRecord, id)
		}
		return "", fmt.Errorf("record %s: %w", id, records.ErrConflict)
	}
	if err := e.newestAfterCreate(ctx, id, name, l[labelRecordNonce], n+1, labels); err != nil {
		return "", err
	}
	for _, v := range vols {
		if versionOf(v) <= n {
			if err := e.cli.VolumeRemove(ctx, v.Name, true); err != nil {
				return "", classify("remove old record "+v.Name, err, nil)
			}
		}
	}
	return strconv.Itoa(n + 1), nil
}

// newestAfterCreate reports ErrConflict if a version above n that does
// not descend from this write (nonce) exists once version n was created as
// name: between PutRecord's check and its create, other writers wrote n
// and n+1 and removed n, so the name was free; the write made there is
// older than the newest, and is removed. Versions are removed only after
// a newer one exists, so a create into such a gap always finds the newer
// one here. A newer version that descends from it was built on it: done.
func (e *Runtime) newestAfterCreate(ctx context.Context, id, name, nonce string, n int, labels map[string]string) error {
	vols, err := e.recordVolumes(ctx, labels, id)
	if err != nil {
		return err
	}
	for _, v := range vols {
		if versionOf(v) > n && !slices.Contains(strings.Split(v.Labels[labelRecordLineage], ","), nonce) {
			_ = e.cli.VolumeRemove(ctx, name, true) // else ignored by readers, removed by the next write
			return fmt.Errorf("record %s: %w", id, records.ErrConflict)
		}
	}
	return nil
}

// extendLineage is nonce followed by the newest maxLineage-1 of parent's.
func extendLineage(nonce, parent string) string {
	out := []string{nonce}
	if parent != "" {
		out = append(out, strings.Split(parent, ",")...)
	}
	return strings.Join(out[:min(len(out), maxLineage)], ",")
}

// DeleteRecord removes every version of id's record, unless one is newer
// than prev (ErrConflict, nothing removed). A version created after the
// list below is newer than every version listed and is never removed
// here: its writer read prev or a later one, and its PutRecord removes
// the older versions itself (a removal of a volume gone is no error with
// force).
func (e *Runtime) DeleteRecord(ctx context.Context, id, prev string, labels map[string]string) error {
	vols, err := e.recordVolumes(ctx, labels, id)
	if err != nil {
		return err
	}
	if prev != "" {
		n, err := strconv.Atoi(prev)
		if err != nil || n <= 0 {
			return fmt.Errorf("record %s: bad version %q", id, prev)
		}
		for _, v := range vols {
			if versionOf(v) > n {
				return fmt.Errorf("record %s: %w", id, records.ErrConflict)
			}
		}
	}
	for _, v := range vols {
		if err := e.cli.VolumeRemove(ctx, v.Name, true); err != nil {
			if err = classify("remove record "+v.Name, err, runtime.ErrNotFound); !errors.Is(err, runtime.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// recordVolumes lists the record volumes carrying labels (and of sandbox
// id, if set).
func (e *Runtime) recordVolumes(ctx context.Context, labels map[string]string, id string) ([]*volume.Volume, error) {
	f := filters.NewArgs()
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	if id != "" {
		f.Add("label", records.LabelRecord+"="+id)
	} else {
		f.Add("label", records.LabelRecord)
	}
	resp, err := e.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, classify("list records", err, nil)
	}
	out := resp.Volumes[:0]
	for _, v := range resp.Volumes {
		// A volume named like a record but not one of ours is skipped.
		if v != nil && strings.HasPrefix(v.Name, records.Name(v.Labels[records.LabelRecord])+"-") {
			out = append(out, v)
		}
	}
	return out, nil
}

func versionOf(v *volume.Volume) int {
	n, err := strconv.Atoi(v.Labels[labelRecordVersion])
	if err != nil {
		return 0
	}
	return n
}

var _ records.Store = (*Runtime)(nil)
