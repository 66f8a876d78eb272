// Package boltstore keeps a Docker gateway's per-sandbox records (settings,
// share links, removal marks: records.Store) in one bbolt file in its
// data dir, File. It promises:
//
//   - One process at a time: the file carries bbolt's exclusive flock, so a
//     second gateway on the same data dir waits in Open (a standby) until
//     the first one exits, however it exits (the kernel drops the lock).
//   - Every write is one transaction, durable when it returns; a write
//     whose prev is no longer the record's version changes nothing
//     (records.ErrConflict).
//   - Versions never repeat in a file, even for a record deleted and made
//     again, so a writer holding a version read before a delete cannot
//     write over the record made after it.
//   - Records are kept per label set, as the Kubernetes store keeps them per
//     scope: ListRecords returns those carrying all of its labels; a record
//     is named by its sandbox id and its Put's labels, so records of a scope
//     the data dir served before never block this scope's.
package boltstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// File is the records file's name in the data dir.
const File = "records.db"

var (
	bucketRecords = []byte("records")
	bucketMeta    = []byte("meta")
	keyOwner      = []byte("owner")
)

// lockPoll is how long one try at the file's lock waits: how often a
// standby notices ctx ending, and at most how late it takes over.
var lockPoll = 250 * time.Millisecond

// Store is the records of one data dir.
type Store struct {
	db    *bolt.DB
	owner string
}

// Open opens (or creates) the records file in dataDir. While another
// process holds it, Open waits as a standby, saying so once in log, until
// that process exits or ctx ends (ctx's error then).
func Open(ctx context.Context, dataDir string, log *slog.Logger) (*Store, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	path := filepath.Join(dataDir, File)
	var since time.Time
	for {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockPoll})
		if err == nil {
			if !since.IsZero() {
				log.InfoContext(ctx, "standby over: the other gateway exited; this one serves", "data_dir", dataDir, "waited", time.Since(since).Round(time.Millisecond))
			}
			return newStore(db)
		}
		if !errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open records %s: %w", path, err)
		}
		if since.IsZero() {
			since = time.Now()
			log.InfoContext(ctx, "standby: another gateway serves from data_dir; this one takes over when it exits", "data_dir", dataDir, "file", path)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("standby on %s: %w", path, err)
		}
	}
}

// newStore makes the buckets and the owner id if the file is new.
func newStore(db *bolt.DB) (*Store, error) {
	s := &Store{db: db}
	err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketRecords); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if o := meta.Get(keyOwner); o != nil {
			s.owner = string(o)
			return nil
		}
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		s.owner = hex.EncodeToString(b)
		return meta.Put(keyOwner, []byte(s.owner))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("records %s: %w", db.Path(), err)
	}
	return s, nil
}

// Owner is the data dir's own id, kept in the file: the same for every
// gateway that serves from this data dir, different for any other.
func (s *Store) Owner() string { return s.owner }

// Once runs fn unless a run of the same name finished in this file
// before, and remembers that it finished (not when fn fails: the next
// Once runs it again).
func (s *Store) Once(name string, fn func() error) error {
	key := []byte("once/" + name)
	var done bool
	if err := s.db.View(func(tx *bolt.Tx) error {
		done = tx.Bucket(bucketMeta).Get(key) != nil
		return nil
	}); err != nil || done {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(key, []byte(time.Now().UTC().Format(time.RFC3339)))
	})
}

// Close releases the file (and its lock: a standby takes over).
func (s *Store) Close() error { return s.db.Close() }

// stored is a record as the file keeps it.
type stored struct {
	V       int               `json:"v"` // format: 1
	Version uint64            `json:"version"`
	Labels  map[string]string `json:"labels"`
	Data    []byte            `json:"data"`
}

// ListRecords returns every record carrying all of labels, by sandbox id.
func (s *Store) ListRecords(ctx context.Context, labels map[string]string) (map[string]records.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[string]records.Record)
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRecords).ForEach(func(k, v []byte) error {
			r, err := decode(k, v)
			if err != nil {
				return err
			}
			if runtime.HasLabels(r.Labels, labels) {
				out[idOf(k)] = records.Record{Data: r.Data, Version: strconv.FormatUint(r.Version, 10)}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	return out, nil
}

// PutRecord writes id's record (under labels) if its version is still
// prev ("": there is none).
func (s *Store) PutRecord(ctx context.Context, id, prev string, data []byte, labels map[string]string) (string, error) {
	if len(data) > records.MaxRecord {
		return "", fmt.Errorf("record %s: %w", id, records.ErrRecordSize)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	l[records.LabelRecord] = id
	key := recordKey(id, l)
	var version uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRecords)
		cur := ""
		if v := b.Get(key); v != nil {
			r, err := decode(key, v)
			if err != nil {
				return err
			}
			cur = strconv.FormatUint(r.Version, 10)
		}
		if cur != prev {
			return fmt.Errorf("record %s: %w", id, records.ErrConflict)
		}
		var err error
		if version, err = b.NextSequence(); err != nil {
			return err
		}
		v, err := json.Marshal(stored{V: 1, Version: version, Labels: l, Data: data})
		if err != nil {
			return err
		}
		return b.Put(key, v)
	})
	if err != nil {
		return "", fmt.Errorf("write record %s: %w", id, err)
	}
	return strconv.FormatUint(version, 10), nil
}

// DeleteRecord removes id's records carrying labels if none has a version
// other than prev ("": whatever they have).
func (s *Store) DeleteRecord(ctx context.Context, id, prev string, labels map[string]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRecords)
		var doomed [][]byte
		prefix := append([]byte(id), 0)
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			r, err := decode(k, v)
			if err != nil {
				return err
			}
			if !runtime.HasLabels(r.Labels, labels) {
				continue
			}
			if prev != "" && strconv.FormatUint(r.Version, 10) != prev {
				return fmt.Errorf("record %s: %w", id, records.ErrConflict)
			}
			doomed = append(doomed, slices.Clone(k))
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete record %s: %w", id, err)
	}
	return nil
}

// recordKey is id, a zero byte, and a digest of labels: ids hold no zero
// byte, so one id's keys sort together.
func recordKey(id string, labels map[string]string) []byte {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(h, "%q=%q\n", k, labels[k])
	}
	return append(append([]byte(id), 0), hex.EncodeToString(h.Sum(nil))[:16]...)
}

func idOf(key []byte) string {
	id, _, _ := bytes.Cut(key, []byte{0})
	return string(id)
}

func decode(k, v []byte) (stored, error) {
	var r stored
	if err := json.Unmarshal(v, &r); err != nil || r.V != 1 {
		return r, fmt.Errorf("record %q: unreadable (format %d): %v", idOf(k), r.V, err)
	}
	return r, nil
}

var _ records.Store = (*Store)(nil)
