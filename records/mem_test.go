package records

import (
	"context"
	"strconv"
	"sync"
)

// memStore keeps records in memory, as the Store contract says.
type memStore map[string]*memRec

type memRec struct {
	mu   sync.Mutex
	recs map[string]Record
	n    int
}

func newMem() memStore { return memStore{"": &memRec{recs: map[string]Record{}}} }

func (s memStore) ListRecords(_ context.Context, _ map[string]string) (map[string]Record, error) {
	m := s[""]
	if m == nil {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Record, len(m.recs))
	for id, r := range m.recs {
		out[id] = r
	}
	return out, nil
}

func (s memStore) PutRecord(_ context.Context, id, prev string, data []byte, _ map[string]string) (string, error) {
	if len(data) > MaxRecord {
		return "", ErrRecordSize
	}
	m := s[""]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recs[id].Version != prev {
		return "", ErrConflict
	}
	m.n++
	v := strconv.Itoa(m.n)
	m.recs[id] = Record{Data: data, Version: v}
	return v, nil
}

func (s memStore) DeleteRecord(_ context.Context, id, prev string, _ map[string]string) error {
	m := s[""]
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.recs[id]
	switch {
	case !ok:
		return nil
	case prev != "" && cur.Version != prev:
		return ErrConflict
	}
	delete(m.recs, id)
	return nil
}
