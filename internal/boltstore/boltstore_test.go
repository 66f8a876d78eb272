package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/records"
)

func open(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.db.NoSync = true // fast: durability is bbolt's own, not under test
	t.Cleanup(func() { s.Close() })
	return s
}

var (
	scopeA = map[string]string{"previewgate.instance": "a"}
	scopeB = map[string]string{"previewgate.instance": "b"}
)

// with is l plus the record label of id, as the manager's Put passes it.
func with(l map[string]string, id string) map[string]string {
	out := map[string]string{records.LabelRecord: id}
	for k, v := range l {
		out[k] = v
	}
	return out
}

// TestRecords: the store's answers, one step after another on one file.
func TestRecords(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	put := func(id, prev, data string, l map[string]string) (string, error) {
		return s.PutRecord(ctx, id, prev, []byte(data), with(l, id))
	}
	v1, err := put("x", "", "one", scopeA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put("x", "", "again", scopeA); !errors.Is(err, records.ErrConflict) {
		t.Errorf("create over an existing record: got %v, want ErrConflict", err)
	}
	v2, err := put("x", v1, "two", scopeA)
	if err != nil || v2 == v1 {
		t.Fatalf("update at %s: got %q %v, want a new version", v1, v2, err)
	}
	if _, err := put("x", v1, "stale", scopeA); !errors.Is(err, records.ErrConflict) {
		t.Errorf("update at a stale version: got %v, want ErrConflict", err)
	}
	if _, err := put("y", "7", "never made", scopeA); !errors.Is(err, records.ErrConflict) {
		t.Errorf("update of a missing record: got %v, want ErrConflict", err)
	}
	// Another scope's record of the same id neither blocks nor shows.
	if _, err := put("x", "", "theirs", scopeB); err != nil {
		t.Errorf("another scope's record of x: %v", err)
	}
	list, err := s.ListRecords(ctx, scopeA)
	if err != nil {
		t.Fatal(err)
	}
	if got := list["x"]; len(list) != 1 || string(got.Data) != "two" || got.Version != v2 {
		t.Errorf("scope a's records: got %v, want x=two at %s", list, v2)
	}
	if list, _ := s.ListRecords(ctx, with(scopeA, "y")); len(list) != 0 {
		t.Errorf("records of y: got %v, want none", list)
	}
	if _, err := s.PutRecord(ctx, "big", "", make([]byte, records.MaxRecord+1), scopeA); !errors.Is(err, records.ErrRecordSize) {
		t.Errorf("a record past MaxRecord: got %v, want ErrRecordSize", err)
	}

	if err := s.DeleteRecord(ctx, "x", v1, scopeA); !errors.Is(err, records.ErrConflict) {
		t.Errorf("delete at a stale version: got %v, want ErrConflict", err)
	}
	if err := s.DeleteRecord(ctx, "x", v2, scopeA); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRecord(ctx, "x", "", scopeA); err != nil {
		t.Errorf("delete of nothing: %v", err)
	}
	if list, _ := s.ListRecords(ctx, scopeB); string(list["x"].Data) != "theirs" {
		t.Errorf("scope b's x after scope a's delete: got %v, want it kept", list)
	}
	// Made again: a version never seen before, so a writer still holding
	// one from before the delete cannot write over it.
	v3, err := put("x", "", "three", scopeA)
	if err != nil || v3 == v1 || v3 == v2 {
		t.Fatalf("x made again: got %q %v, want a version other than %s and %s", v3, err, v1, v2)
	}
	if _, err := put("x", v1, "ghost", scopeA); !errors.Is(err, records.ErrConflict) {
		t.Errorf("write at a version from before the delete: got %v, want ErrConflict", err)
	}
}

// TestRecordsSurviveReopen: records and the owner id are the file's,
// kept across a gateway restart.
func TestRecordsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.PutRecord(ctx, "x", "", []byte("kept"), with(scopeA, "x"))
	if err != nil {
		t.Fatal(err)
	}
	owner := s.Owner()
	s.Close()
	s = open(t, dir)
	if s.Owner() != owner || len(owner) != 16 {
		t.Errorf("owner after reopen: got %q, want %q (16 hex digits)", s.Owner(), owner)
	}
	list, err := s.ListRecords(ctx, scopeA)
	if err != nil || string(list["x"].Data) != "kept" || list["x"].Version != v {
		t.Errorf("after reopen: got %v %v, want x=kept at %s", list, err, v)
	}
	if other := open(t, t.TempDir()); other.Owner() == owner {
		t.Errorf("another data dir has the same owner id %q", owner)
	}
}

// TestStandby: a second Open of the same data dir waits, saying so once,
// and returns as soon as the first store closes; ctx ends the wait.
func TestStandby(t *testing.T) {
	dir := t.TempDir()
	first := open(t, dir)
	var logs syncBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	opened := make(chan *Store, 1)
	go func() {
		s, err := Open(context.Background(), dir, log)
		if err != nil {
			t.Error(err)
		}
		opened <- s
	}()
	waitLog(t, &logs, "standby: another gateway serves from data_dir")
	select {
	case <-opened:
		t.Fatal("a second Open returned while the first held the file")
	case <-time.After(2 * lockPoll):
	}
	t0 := time.Now()
	first.Close()
	s := <-opened
	defer s.Close()
	if took := time.Since(t0); took > 4*lockPoll {
		t.Errorf("standby took over %v after the first closed, want within %v", took, 4*lockPoll)
	}
	if n := strings.Count(logs.String(), "standby:"); n != 1 {
		t.Errorf("standby said so %d times, want once:\n%s", n, logs.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*lockPoll)
	defer cancel()
	if _, err := Open(ctx, dir, slog.New(slog.DiscardHandler)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("standby whose ctx ends: got %v, want its ctx's error", err)
	}
}

// FuzzRecords runs a sequence of writes and deletes over a few ids, two
// scopes and stale or current versions against a model: every answer and
// every list agree with it.
func FuzzRecords(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0x10, 0x10, 0x31, 0x22, 0x10, 0x03})
	f.Add(bytes.Repeat([]byte{0x40, 0x01}, 20))
	f.Fuzz(func(t *testing.T, ops []byte) {
		ctx := context.Background()
		s := open(t, t.TempDir())
		type rec struct {
			version, data string
		}
		model := map[string]rec{} // by scope "/" id
		var seen []string         // versions ever returned
		scopes := []map[string]string{scopeA, scopeB}
		for i, op := range ops {
			id := fmt.Sprintf("s%d", op&3)
			sc := int(op>>2) & 1
			key := strconv.Itoa(sc) + "/" + id
			cur, exists := model[key]
			prev := cur.version
			if op&0x10 != 0 && len(seen) > 0 { // a stale or foreign version
				prev = seen[int(op>>5)%len(seen)]
			}
			if op&0x80 != 0 {
				err := s.DeleteRecord(ctx, id, prev, scopes[sc])
				switch {
				case exists && prev != "" && prev != cur.version:
					if !errors.Is(err, records.ErrConflict) {
						t.Fatalf("op %d: delete %s at stale %s (current %s): got %v, want ErrConflict", i, key, prev, cur.version, err)
					}
				case err != nil:
					t.Fatalf("op %d: delete %s: %v", i, key, err)
				default:
					delete(model, key)
				}
			} else {
				data := fmt.Sprintf("d%d", i)
				v, err := s.PutRecord(ctx, id, prev, []byte(data), with(scopes[sc], id))
				if prev != cur.version {
					if !errors.Is(err, records.ErrConflict) {
						t.Fatalf("op %d: put %s at %q (current %q): got %q %v, want ErrConflict", i, key, prev, cur.version, v, err)
					}
				} else {
					if err != nil {
						t.Fatalf("op %d: put %s at %q: %v", i, key, prev, err)
					}
					for _, old := range seen {
						if old == v {
							t.Fatalf("op %d: version %s given twice", i, v)
						}
					}
					seen = append(seen, v)
					model[key] = rec{v, data}
				}
			}
			for sc, l := range scopes {
				list, err := s.ListRecords(ctx, l)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for key, r := range model {
					if !strings.HasPrefix(key, strconv.Itoa(sc)+"/") {
						continue
					}
					n++
					got := list[strings.TrimPrefix(key, strconv.Itoa(sc)+"/")]
					if got.Version != r.version || string(got.Data) != r.data {
						t.Fatalf("op %d: list of scope %d: %s is %q at %s, want %q at %s", i, sc, key, got.Data, got.Version, r.data, r.version)
					}
				}
				if len(list) != n {
					t.Fatalf("op %d: list of scope %d: %d records, want %d", i, sc, len(list), n)
				}
			}
		}
	})
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitLog(t *testing.T, b *syncBuf, want string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(b.String(), want) {
			return
		}
	}
	t.Fatalf("log never said %q:\n%s", want, b.String())
}
