package sandboxmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Per-sandbox settings and share links (#23). They live in a store
// (runtime.Records: Kubernetes ConfigMaps; a Docker gateway's bbolt file
// in its data dir), never in a replica's memory alone: a replica's view is a
// cache, written through by its own changes and reloaded by every re-check
// (recheck.go, Config.RecheckEvery: 5 s), so a change made on one replica
// governs every other within RecheckEvery plus one list call, and survives
// a restart (Start loads them before serving). A sandbox's Remove replaces
// its settings and links with a removal mark (tombstone.go), which other
// replicas' wakes read; a record whose sandbox vanished is removed by the
// next re-check, unless its mark is younger than markLife.
//
// That bound holds only while the runtime answers. A replica whose lists
// keep failing would go on granting what another replica revoked (a link,
// a "public"), so a copy not read from the runtime within staleRecords
// re-check periods is stale: FreshSettings says so, and the gateway then
// refuses what the copy would grant (a link answers 503, a sandbox needs a
// token) until a list or a reload of that record succeeds.

// Settings are what a sandbox's backend set for it at run time.
type Settings struct {
	// Public, if set, overrides the template's public: reachable without
	// a token (never "anyone may create").
	Public *bool `json:"public,omitempty"`
	// KeepUpUntil: the idle reaper leaves the running sandbox up until
	// then, traffic or not (bounded by its template's max_keep_up).
	KeepUpUntil time.Time `json:"keep_up_until,omitzero"`
	// Links are its share links, expired ones pruned at each write.
	Links []Link `json:"links,omitempty"`
}

// Link is one share link as kept: the digest of its secret, never the
// secret itself (package auth mints and checks it).
type Link struct {
	ID      string    `json:"id"`
	Digest  string    `json:"digest"`
	Port    int       `json:"port,omitempty"` // 0: the template's port
	Path    string    `json:"path"`           // the path prefix it opens
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Revoked time.Time `json:"revoked,omitzero"` // kept until Expires, so the page can say so
}

// MaxLinks bounds a sandbox's live (unexpired) links, so a record stays
// far under runtime.MaxRecord.
const MaxLinks = 32

// maxSettingsTries bounds the retries of a change that lost to another
// writer.
const maxSettingsTries = 20

// staleRecords is how many re-check periods a replica's copy of a record
// may go without a read from the runtime before FreshSettings calls it
// stale.
const staleRecords = 3

// ErrNoRecords: the runtime keeps no records (a fake in tests).
var ErrNoRecords = errors.New("this runtime keeps no per-sandbox settings")

// ErrTooManyLinks: a sandbox has MaxLinks live links already.
var ErrTooManyLinks = fmt.Errorf("at most %d live share links per sandbox", MaxLinks)

// recordCache is this replica's copy of the records.
type recordCache struct {
	// byID is read on every request (policy): an immutable map swapped
	// whole, so readers take no lock. Writers copy it under mu.
	byID  atomic.Pointer[map[string]cachedRecord]
	mu    sync.Mutex           // serializes writers of byID; guards wrote
	wrote map[string]time.Time // last local write per id: a list begun before it knows less
	fresh singleflight.Group   // one reload of one record at a time
	tried sync.Map             // id → time.Time of its last on-demand reload
	// listed is when the last successful list of every record began
	// (unix nanoseconds); stale reports whether that was logged as too old.
	listed atomic.Int64
	stale  atomic.Bool
}

type cachedRecord struct {
	s       Settings     // never changed once cached: readers share its slices
	removed *removalMark // a DELETE's mark (tombstone.go); nil if none
	version string       // the runtime's, for the next write's guard
	read    time.Time    // when the read from the runtime (or the write) that gave it began
}

// settingsOf fills in's view of settings s at now.
func (in *Info) settingsOf(s Settings, now time.Time) {
	in.PublicSetting = s.Public
	if s.KeepUpUntil.After(now) {
		in.KeepUpUntil = s.KeepUpUntil
	}
	for _, l := range s.Links {
		if l.Revoked.IsZero() && l.Expires.After(now) {
			in.LiveLinks++
		}
	}
}

// Settings returns sandbox id's settings as this replica knows them (no
// runtime call). The Links slice is shared: do not change it.
func (m *Manager) Settings(id string) Settings {
	if p := m.recs.byID.Load(); p != nil {
		return (*p)[id].s
	}
	return Settings{}
}

// FreshSettings is Settings, and whether this replica's copy was read
// from the runtime (a list of every record, or this one's reload or
// write) within staleRecords re-check periods. A stale copy may still
// hold a link revoked, or a public withdrawn, on another replica: grant
// nothing on it. Always fresh without periodic re-checks.
func (m *Manager) FreshSettings(id string) (Settings, bool) {
	p := m.recs.byID.Load()
	if p == nil {
		return Settings{}, m.caps.Records == nil || m.recordsFresh(time.Time{})
	}
	cr := (*p)[id]
	return cr.s, m.caps.Records == nil || m.recordsFresh(cr.read)
}

// recordsFresh reports whether a record read at read, or the last list
// of every record, is recent enough to grant on.
func (m *Manager) recordsFresh(read time.Time) bool {
	every := m.cfg.RecheckEvery
	if every <= 0 {
		return true
	}
	at := time.Unix(0, m.recs.listed.Load())
	if read.After(at) {
		at = read
	}
	return m.now().Sub(at) <= staleRecords*every
}

// noteRecordsAge logs, once each way, when this replica's copy of every
// record turns stale (the runtime's list keeps failing) and fresh again:
// the access it then refuses must not be a silent mystery.
func (m *Manager) noteRecordsAge() {
	if m.caps.Records == nil {
		return
	}
	if fresh := m.recordsFresh(time.Time{}); !fresh && !m.recs.stale.Swap(true) {
		m.log.Error("sandbox settings could not be re-read from the runtime: this replica refuses share links and treats every sandbox as private until it can",
			"last_read", time.Unix(0, m.recs.listed.Load()).UTC())
	} else if fresh && m.recs.stale.Swap(false) {
		m.log.Info("sandbox settings re-read from the runtime: share links and public sandboxes work again")
	}
}

// UpdateSettings applies fn to sandbox id's settings, read fresh from the
// runtime, and writes them back, retrying when another replica wrote in
// between. ErrNoContainer if the sandbox does not exist; fn's error as is.
func (m *Manager) UpdateSettings(ctx context.Context, id string, fn func(*Settings) error) (Settings, error) {
	rs := m.caps.Records
	if rs == nil {
		return Settings{}, ErrNoRecords
	}
	if _, err := m.ownedByID(ctx, id); err != nil {
		return Settings{}, err
	}
	labels := m.recordLabels(id)
	for try := 0; ; try++ {
		cur, err := m.loadRecord(ctx, id)
		if err != nil {
			return Settings{}, err
		}
		s := cur.s
		s.Links = pruneLinks(s.Links, m.now())
		if err := fn(&s); err != nil {
			return Settings{}, err
		}
		// A live removal mark stays: a wake on another replica may not
		// have checked it yet (tombstone.go).
		mark := m.liveMark(cur.removed)
		data, err := json.Marshal(storedRecord{Settings: s, Removed: mark})
		if err != nil {
			return Settings{}, fmt.Errorf("settings of %s: %w", id, err)
		}
		wrote := m.now()
		v, err := rs.PutRecord(ctx, id, cur.version, data, labels)
		if errors.Is(err, runtime.ErrConflict) && try < maxSettingsTries {
			// Another writer (maybe another replica) came first: read
			// again after a short random pause, so racers spread out.
			if err := runtime.Sleep(ctx, time.Duration(5+mrand.IntN(20*(try+1)))*time.Millisecond); err != nil {
				return Settings{}, err
			}
			continue
		}
		if err != nil {
			return Settings{}, err
		}
		m.cacheRecord(id, cachedRecord{s: s, removed: mark, version: v, read: wrote}, true)
		return s, nil
	}
}

// loadRecord reads id's record from the runtime into the cache.
func (m *Manager) loadRecord(ctx context.Context, id string) (cachedRecord, error) {
	began := m.now()
	list, err := m.caps.Records.ListRecords(ctx, m.recordLabels(id))
	if err != nil {
		return cachedRecord{}, err
	}
	rec, ok := list[id]
	if !ok {
		m.cacheRecord(id, cachedRecord{read: began}, false)
		return cachedRecord{read: began}, nil
	}
	cr := decodeRecord(m, id, rec, began)
	m.cacheRecord(id, cr, false)
	return cr, nil
}

// RefreshSettings reloads id's settings from the runtime (a link minted
// on another replica moments ago) and returns them, fresh or not as
// FreshSettings says. Reloads of one sandbox are at least a second apart:
// concurrent callers share one, and a caller coming sooner waits for the
// next (at most a second). Only for a sandbox the manager knows; otherwise
// the cache answers.
func (m *Manager) RefreshSettings(ctx context.Context, id string) (Settings, bool) {
	if m.caps.Records == nil {
		return Settings{}, true
	}
	if _, ok := m.Known(id); !ok {
		return m.FreshSettings(id)
	}
	ch := m.recs.fresh.DoChan(id, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if t, ok := m.recs.tried.Load(id); ok {
			if err := runtime.Sleep(ctx, time.Second-m.now().Sub(t.(time.Time))); err != nil {
				return nil, nil
			}
		}
		m.recs.tried.Store(id, m.now())
		if _, err := m.loadRecord(ctx, id); err != nil {
			m.log.WarnContext(ctx, "reload of sandbox settings failed", "sandbox", id, "err", err)
		}
		return nil, nil
	})
	select {
	case <-ch:
	case <-ctx.Done():
	}
	return m.FreshSettings(id)
}

// reloadRecords replaces the cache with the runtime's records (Start and
// every re-check), keeping what this replica wrote after began. It returns
// the records listed, by id.
func (m *Manager) reloadRecords(ctx context.Context, began time.Time) (map[string]cachedRecord, error) {
	if m.caps.Records == nil {
		return nil, nil
	}
	listed := m.now()
	list, err := m.caps.Records.ListRecords(ctx, m.createLabels())
	if err != nil {
		return nil, err
	}
	next := make(map[string]cachedRecord, len(list))
	has := make(map[string]cachedRecord, len(list))
	for id, rec := range list {
		next[id] = decodeRecord(m, id, rec, listed)
		has[id] = next[id]
	}
	m.recs.mu.Lock()
	cur := m.recs.byID.Load()
	for id, t := range m.recs.wrote {
		if t.After(began) && cur != nil {
			next[id] = (*cur)[id]
		} else {
			delete(m.recs.wrote, id)
		}
	}
	m.recs.byID.Store(&next)
	m.recs.listed.Store(listed.UnixNano())
	m.recs.mu.Unlock()
	return has, nil
}

// cacheRecord stores cr as id's; local: this replica just wrote it.
func (m *Manager) cacheRecord(id string, cr cachedRecord, local bool) {
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	if m.recs.wrote == nil {
		m.recs.wrote = map[string]time.Time{}
	}
	next := m.copyRecordsLocked()
	next[id] = cr
	m.recs.byID.Store(&next)
	if local {
		m.recs.wrote[id] = m.now()
	}
}

// recordLabels select sandbox id's record within this manager's scope.
func (m *Manager) recordLabels(id string) map[string]string {
	l := maps.Clone(m.createLabels())
	l[runtime.LabelRecord] = id
	return l
}

// decodeRecord reads a stored record; an unreadable one counts as empty
// (and is overwritten by the next change) rather than blocking changes.
func decodeRecord(m *Manager, id string, rec runtime.Record, read time.Time) cachedRecord {
	var s storedRecord
	if err := json.Unmarshal(rec.Data, &s); err != nil {
		m.log.Warn("unreadable sandbox settings ignored", "sandbox", id, "err", err)
		s = storedRecord{}
	}
	return cachedRecord{s: s.Settings, removed: s.Removed, version: rec.Version, read: read}
}

// pruneLinks drops the links that expired before now.
func pruneLinks(ls []Link, now time.Time) []Link {
	out := make([]Link, 0, len(ls))
	for _, l := range ls {
		if l.Expires.After(now) {
			out = append(out, l)
		}
	}
	return out
}

// AddLink appends l to s if the record keeps room for every change that
// adds no link: revoking each link, setting public and a keep-up time
// (a record past runtime.MaxRecord cannot be written, so a link minted
// into the last bytes could never be revoked). ErrTooManyLinks if not.
func AddLink(s *Settings, l Link) error {
	if len(s.Links) >= MaxLinks {
		return ErrTooManyLinks
	}
	worst, no := *s, false
	worst.Public = &no
	worst.KeepUpUntil = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(23*3600+59*60)))
	worst.Links = append(slices.Clone(s.Links), l)
	for i := range worst.Links {
		worst.Links[i].Revoked = worst.KeepUpUntil
	}
	// And a live removal mark, which a change keeps (tombstone.go).
	mark := &removalMark{ID: randomHex(), At: worst.KeepUpUntil}
	if b, err := json.Marshal(storedRecord{Settings: worst, Removed: mark}); err != nil || len(b) > runtime.MaxRecord {
		return fmt.Errorf("%w: the sandbox's record (%d bytes) is full", ErrTooManyLinks, runtime.MaxRecord)
	}
	s.Links = append(s.Links, l)
	return nil
}

// LoadSettings reads sandbox id's settings from the runtime (and caches
// them).
func (m *Manager) LoadSettings(ctx context.Context, id string) (Settings, error) {
	if m.caps.Records == nil {
		return Settings{}, ErrNoRecords
	}
	cr, err := m.loadRecord(ctx, id)
	return cr.s, err
}

// copyRecordsLocked returns a copy of the cached records to change and
// swap in (changes are rare: a write, a re-check). m.recs.mu must be held.
func (m *Manager) copyRecordsLocked() map[string]cachedRecord {
	cur := m.recs.byID.Load()
	if cur == nil {
		return map[string]cachedRecord{}
	}
	return maps.Clone(*cur)
}
