// Package records keeps each sandbox's record: its settings (public,
// keep_up_until), share links and a DELETE's removal mark (#23), behind one
// Store (Kubernetes: ConfigMaps; Docker: a bbolt file in the data dir).
// A replica holds a cache, written through by its own changes and reloaded
// whole by every re-check, so a change on one replica governs every other
// within RecheckEvery plus one list call, and survives a restart.
//
// That bound holds only while the store answers: a copy not read from the
// store within staleAfter re-check periods is stale, and callers refuse
// what it would grant (a link answers 503, a sandbox needs a token) until
// a read succeeds. A nil store keeps nothing: empty settings, always
// fresh, and changes fail with ErrNoRecords.
package records

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Options configure Records.
type Options struct {
	// Labels are carried by every record this gateway writes and select
	// the ones it reads (its scope; runtime.Scoped).
	Labels map[string]string
	// RecheckEvery is how often the owner reloads (Reload); a copy older
	// than staleAfter of them is stale. Zero or negative: never stale.
	RecheckEvery time.Duration
	// LongestWake is a wake's longest time: removal marks outlive twice
	// that. Nil: the marks' least life.
	LongestWake func() time.Duration
	Log         *slog.Logger
}

// staleAfter is how many re-check periods a copy may go unread before
// Settings calls it stale.
const staleAfter = 3

// maxTries bounds the retries of a change that lost to another writer.
const maxTries = 20

// Records is this replica's copy of the records, and the changes it makes.
type Records struct {
	store Store
	o     Options
	now   func() time.Time // tests

	// byID is read on every request: an immutable map swapped whole, so
	// readers take no lock; writers copy it under mu.
	byID  atomic.Pointer[map[string]cached]
	mu    sync.Mutex           // serializes writers of byID; guards wrote
	wrote map[string]time.Time // last local write per id: a list begun before it knows less
	fresh singleflight.Group   // one reload of one record at a time
	tried sync.Map             // id → time.Time of its last on-demand reload
	// listed is when the last full list began (unix ns); stale: logged as
	// too old.
	listed atomic.Int64
	stale  atomic.Bool
}

type cached struct {
	s       Settings  // never changed once cached: readers share its slices
	removed *mark     // a DELETE's mark (marks.go); nil if none
	version string    // the store's, for the next write's guard
	read    time.Time // when the read from the store (or the write) that gave it began
}

// New returns the records kept in store (nil: none).
func New(store Store, o Options) *Records {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Records{store: store, o: o, now: time.Now, wrote: map[string]time.Time{}}
}

// Settings returns id's settings as this replica knows them (no store
// call), and whether that copy was read within staleAfter re-check
// periods: grant nothing on a stale one. The Links slice is shared.
func (r *Records) Settings(id string) (Settings, bool) {
	if r == nil || r.store == nil {
		return Settings{}, true
	}
	p := r.byID.Load()
	if p == nil {
		return Settings{}, r.freshAt(time.Time{})
	}
	c := (*p)[id]
	return c.s, r.freshAt(c.read)
}

// freshAt reports whether a record read at read, or the last full list,
// is recent enough to grant on.
func (r *Records) freshAt(read time.Time) bool {
	every := r.o.RecheckEvery
	if every <= 0 {
		return true
	}
	at := time.Unix(0, r.listed.Load())
	if read.After(at) {
		at = read
	}
	return r.now().Sub(at) <= staleAfter*every
}

// Refresh starts a reload of id's settings from the store (a link minted
// on another replica moments ago), unless one is under way, and returns
// at once what Settings returns: the caller never waits for the store,
// so a made-up link of an existing sandbox costs what it costs for a
// missing one, and holds no request. Reloads of one sandbox are a second
// apart at least: one asked sooner waits for its slot in the background,
// and callers meanwhile share it. Only for a sandbox that exists, so a
// made-up id costs no store call.
func (r *Records) Refresh(ctx context.Context, id string) (Settings, bool) {
	if r == nil || r.store == nil {
		return Settings{}, true
	}
	r.refresh(ctx, id)
	return r.Settings(id)
}

// refresh starts (or joins) the reload of id; the channel says when it
// is done (tests).
func (r *Records) refresh(ctx context.Context, id string) <-chan singleflight.Result {
	return r.fresh.DoChan(id, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if t, ok := r.tried.Load(id); ok {
			if err := sleep(ctx, time.Second-r.now().Sub(t.(time.Time))); err != nil {
				return nil, nil
			}
		}
		r.tried.Store(id, r.now())
		if _, err := r.load(ctx, id); err != nil {
			r.o.Log.WarnContext(ctx, "reload of sandbox settings failed", "sandbox", id, "err", err)
		}
		return nil, nil
	})
}

// Load reads sandbox id's settings from the store (and caches them).
func (r *Records) Load(ctx context.Context, id string) (Settings, error) {
	if r == nil || r.store == nil {
		return Settings{}, ErrNoRecords
	}
	c, err := r.load(ctx, id)
	return c.s, err
}

// Update applies fn to id's settings, read fresh, and writes them back,
// retrying when another replica wrote in between; expired links are
// pruned first. fn's error comes back as it is. The caller checks that
// the sandbox exists.
func (r *Records) Update(ctx context.Context, id string, fn func(*Settings) error) (Settings, error) {
	if r == nil || r.store == nil {
		return Settings{}, ErrNoRecords
	}
	var out Settings
	err := r.rewrite(ctx, id, func(cur cached) (*cached, error) {
		s := cur.s
		s.Links = links.Prune(s.Links, r.now())
		if err := fn(&s); err != nil {
			return nil, err
		}
		out = s
		// A live removal mark stays (marks.go).
		return &cached{s: s, removed: r.liveMark(cur.removed)}, nil
	})
	if err != nil {
		return Settings{}, err
	}
	return out, nil
}

// load reads id's record from the store into the cache.
func (r *Records) load(ctx context.Context, id string) (cached, error) {
	began := r.now()
	list, err := r.store.ListRecords(ctx, r.labelsOf(id))
	if err != nil {
		return cached{}, err
	}
	c := cached{read: began}
	if rec, ok := list[id]; ok {
		c = r.decode(id, rec, began)
	}
	r.cache(id, c, false)
	return c, nil
}

// Listing is the records one Reload read, for DropOrphans.
type Listing struct{ byID map[string]cached }

// Reload replaces the cache with the store's records (start, re-check),
// keeping what this replica wrote after began, and returns the listing.
func (r *Records) Reload(ctx context.Context, began time.Time) (Listing, error) {
	if r == nil || r.store == nil {
		return Listing{}, nil
	}
	defer r.noteAge()
	listed := r.now()
	list, err := r.store.ListRecords(ctx, r.o.Labels)
	if err != nil {
		return Listing{}, err
	}
	next := make(map[string]cached, len(list))
	has := make(map[string]cached, len(list))
	for id, rec := range list {
		next[id] = r.decode(id, rec, listed)
		has[id] = next[id]
	}
	r.mu.Lock()
	cur := r.byID.Load()
	for id, t := range r.wrote {
		if t.After(began) && cur != nil {
			next[id] = (*cur)[id]
		} else {
			delete(r.wrote, id)
		}
	}
	if cur != nil {
		// A record read on demand after this list began (Refresh: a link
		// minted on another replica just now) knows more than the list:
		// dropping it would take back a link this replica already
		// granted, and end the streams it opened (the gateway's grants).
		for id, c := range *cur {
			if c.read.After(listed) {
				next[id] = c
			}
		}
	}
	r.byID.Store(&next)
	r.listed.Store(listed.UnixNano())
	r.mu.Unlock()
	return Listing{has}, nil
}

// noteAge logs, once each way, when this replica's copy turns stale and
// fresh again: the access it refuses must not be a silent mystery.
func (r *Records) noteAge() {
	if fresh := r.freshAt(time.Time{}); !fresh && !r.stale.Swap(true) {
		r.o.Log.Error("sandbox settings could not be re-read from the runtime: this replica refuses share links and treats every sandbox as private until it can",
			"last_read", time.Unix(0, r.listed.Load()).UTC())
	} else if fresh && r.stale.Swap(false) {
		r.o.Log.Info("sandbox settings re-read from the runtime: share links and public sandboxes work again")
	}
}

// cache stores c as id's; local: this replica just wrote it.
func (r *Records) cache(id string, c cached, local bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.copyLocked()
	next[id] = c
	r.byID.Store(&next)
	if local {
		r.wrote[id] = r.now()
	}
}

// uncache drops id's record from the cache (deleted in the store).
func (r *Records) uncache(id string) {
	r.mu.Lock()
	next := r.copyLocked()
	delete(next, id)
	r.byID.Store(&next)
	r.mu.Unlock()
	r.tried.Delete(id)
}

// copyLocked returns a copy of the cache to change and swap in (changes
// are rare). r.mu must be held.
func (r *Records) copyLocked() map[string]cached {
	cur := r.byID.Load()
	if cur == nil {
		return map[string]cached{}
	}
	return maps.Clone(*cur)
}

// labelsOf select sandbox id's record within this gateway's scope.
func (r *Records) labelsOf(id string) map[string]string {
	l := maps.Clone(r.o.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelRecord] = id
	return l
}

// decode reads a stored record; an unreadable one counts as empty (the
// next change overwrites it).
func (r *Records) decode(id string, rec Record, read time.Time) cached {
	s, m, err := decode(rec.Data)
	if err != nil {
		r.o.Log.Warn("unreadable sandbox settings ignored", "sandbox", id, "err", err)
	}
	return cached{s: s, removed: m, version: rec.Version, read: read}
}

// errLeave: rewrite's next wants the record left as it is.
var errLeave = errors.New("leave the record")

// rewrite replaces id's record, read fresh, with what next makes of it
// (nil: delete it; errLeave: leave it) unless another writer came since
// the read, then reads again and retries. next's other errors come back.
func (r *Records) rewrite(ctx context.Context, id string, next func(cur cached) (*cached, error)) error {
	for try := 0; ; try++ {
		cur, err := r.load(ctx, id)
		if err != nil {
			return err
		}
		want, err := next(cur)
		switch {
		case errors.Is(err, errLeave):
			return nil
		case err != nil:
			return err
		case want == nil && cur.version == "":
			return nil
		case want == nil:
			if err = r.store.DeleteRecord(ctx, id, cur.version, r.o.Labels); err == nil {
				r.uncache(id)
			}
		default:
			err = r.put(ctx, id, cur.version, *want)
		}
		if errors.Is(err, ErrConflict) && try < maxTries {
			// Another writer came first: read again after a short random pause,
			// so racers spread out.
			if err := sleep(ctx, time.Duration(5+mrand.IntN(20*(try+1)))*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		return err
	}
}

// put writes c as sandbox id's record over version prev and caches it.
func (r *Records) put(ctx context.Context, id, prev string, c cached) error {
	data, err := encode(c.s, c.removed)
	if err != nil {
		return fmt.Errorf("record of %s: %w", id, err)
	}
	wrote := r.now()
	v, err := r.store.PutRecord(ctx, id, prev, data, r.labelsOf(id))
	if err != nil {
		return err
	}
	c.version, c.read = v, wrote
	r.cache(id, c, true)
	return nil
}

var sleep = runtime.Sleep
