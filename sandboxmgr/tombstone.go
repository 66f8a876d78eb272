package sandboxmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A DELETE holds across replicas (DESIGN.md "Many replicas, no shared
// memory"). A wake of the sandbox on another replica may have its create
// in flight (the container not yet visible to the DELETE's lookup) or be
// between create and start; sandbox.removals stops only this replica's
// wakes. So the DELETE also leaves a removal mark (a tombstone) in the
// sandbox's record, which every replica reads fresh from the runtime:
//
//   - Remove writes the mark, in place of the settings and links, before
//     it looks the container up to remove it.
//   - A wake that has to act (create, claim, start, unpause; not one that
//     finds the container running) reads the record before its first
//     action: the mark there, if any, is its baseline. Once its container
//     runs, before the wake hands it out, it reads the record again: a
//     mark that is there and is not its baseline is a DELETE that came
//     after the wake began. The wake removes the container it made itself
//     (by ID, never another's) and fails with ErrNoContainer.
//
// Why nothing a wake W made runs once a DELETE D and W are done, when W's
// baseline read came before D's write: either W's check after start comes
// after D's write and sees the mark, or it comes before it; then W's
// create had returned before that check, so before D's write and before
// D's lookup after it, which finds the container and removes it. (That
// lookup asks the runtime, not a cache: a Docker inspect, a Kubernetes
// get, which see a create as soon as it returned.) A container W did not
// make (it lost the create race) is its maker's to check and remove. A
// wake whose baseline read came after D's write sees the mark then and is
// not failed by it: DELETE then PUT creates anew, on any replica.
//
// A create reads the record twice, not three times. A new sandbox's
// create clears the record first (clearForCreate: settings a sandbox
// removed behind the manager's back left), and where the create is the
// wake's first action that read is its baseline: it still comes before
// the wake makes anything (before OnCreate, the claim and the create),
// which is all the argument above asks of a baseline read; the argument
// never counts on a second read before the create. What changes is only
// where a DELETE between the two former reads is caught: before, by the
// clear, before the create; now it comes after the baseline, so the check
// after start sees its mark (and removes what the wake made) or came
// before D's write, and D's lookup finds the container: the case above.
// A re-read after the clear's write conflicted is compared with the
// baseline, never taken as a new one. A start or an unpause reads the
// record twice as before (readMark, then the check after start).
//
// The mark must outlive every wake that may need to see it. Nothing
// deletes a record whose mark is younger than markLife, which is longer
// than any wake; a deletion is conditional on the version it read, so a
// mark written meanwhile survives it (the re-check's orphan drop, a
// create's or the reaper's clear). An older mark goes with the next of
// those, or the sandbox's next settings write: marks do not pile up.

// removalMark is a DELETE's mark in a sandbox's record.
type removalMark struct {
	ID string    `json:"id"` // random: one per DELETE
	At time.Time `json:"at"` // the writer's clock, for markLife
}

// storedRecord is what a record's bytes hold. A record written before
// removal marks existed has none and decodes as before.
type storedRecord struct {
	Settings
	Removed *removalMark `json:"removed,omitempty"`
}

// minMarkLife is the least time a removal mark is kept (markLife).
const minMarkLife = 10 * time.Minute

// markLife is how long a removal mark is kept at least: twice the longest
// a wake can take (its ready timeout, plus a wait for a start slot for
// each of its create and start), and never under minMarkLife.
func (m *Manager) markLife() time.Duration {
	longest := readyTimeout(nil)
	if m.cfg.ListTemplates != nil {
		for _, t := range m.cfg.ListTemplates() {
			longest = max(longest, readyTimeout(t))
		}
	}
	return max(minMarkLife, 2*(longest+2*m.cfg.StartQueueTimeout))
}

// markOf is the ID of cr's removal mark; "" if it has none.
func markOf(cr cachedRecord) string {
	if cr.removed == nil {
		return ""
	}
	return cr.removed.ID
}

// liveMark is mark unless it is older than markLife (then nil).
func (m *Manager) liveMark(mark *removalMark) *removalMark {
	if mark == nil || m.now().Sub(mark.At) > m.markLife() {
		return nil
	}
	return mark
}

// markRemoved writes a new removal mark into sandbox id's record, in
// place of its settings and links. Remove calls it before its lookup.
func (m *Manager) markRemoved(ctx context.Context, id string) error {
	mark := &removalMark{ID: randomHex(), At: m.now()}
	err := m.rewriteRecord(ctx, id, func(cachedRecord) (*storedRecord, error) {
		return &storedRecord{Removed: mark}, nil
	})
	if errors.Is(err, runtime.ErrForeignRecord) {
		// No record of this scope can exist under that name: no wake of
		// this scope reads a mark there either. The lookup still removes
		// what it finds.
		m.log.WarnContext(ctx, "removal mark not written: another gateway's record holds the name", "sandbox", id, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark %s removed: %w", id, err)
	}
	return nil
}

// clearRecord drops sandbox id's settings and links, and a removal mark
// older than markLife, from its record read fresh; a record left with
// nothing is deleted. check, if set, sees each read's mark ID first; its
// error stops the clear and is returned.
func (m *Manager) clearRecord(ctx context.Context, id string, check func(mark string) error) error {
	return m.rewriteRecord(ctx, id, func(cur cachedRecord) (*storedRecord, error) {
		if check != nil {
			if err := check(markOf(cur)); err != nil {
				return nil, err
			}
		}
		live := m.liveMark(cur.removed)
		switch {
		case cur.version == "":
			return nil, errLeaveRecord // none
		case live == nil:
			return nil, nil
		case cur.s.empty():
			return nil, errLeaveRecord // a live mark alone: already clear
		}
		return &storedRecord{Removed: live}, nil
	})
}

// dropOrphanRecords removes the records of sandboxes the runtime no
// longer has (removed by something else than this manager), but not one
// whose removal mark is younger than markLife. recorded
// was listed before alive, so a record written for a sandbox made since
// is not in it; a record written since it was listed is not deleted
// either (the deletion is conditional on the version listed). It stops
// at ctx's end (the re-check's deadline) and leaves the rest to the next
// re-check: orphans can be many (a DELETE of any id leaves a mark).
func (m *Manager) dropOrphanRecords(ctx context.Context, recorded map[string]cachedRecord, alive map[string]ctrInfo) {
	for id, cr := range recorded {
		if ctx.Err() != nil {
			return
		}
		if _, ok := alive[id]; ok || m.liveMark(cr.removed) != nil {
			continue
		}
		m.mu.RLock()
		sb := m.sandboxes[id]
		waking := sb != nil && sb.waking.Load() > 0
		m.mu.RUnlock()
		if waking {
			continue
		}
		err := m.caps.Records.DeleteRecord(ctx, id, cr.version, m.createLabels())
		switch {
		case err == nil:
			m.uncacheRecord(id)
		case !errors.Is(err, runtime.ErrConflict): // a conflict: written since, not an orphan's
			m.log.WarnContext(ctx, "remove sandbox settings", "sandbox", id, "err", err)
		}
	}
}

// forgetRecord clears id's record in the runtime and the cache
// (clearRecord): its settings and links go, a live removal mark stays.
func (m *Manager) forgetRecord(ctx context.Context, id string) {
	if err := m.clearRecord(ctx, id, nil); err != nil {
		m.log.WarnContext(ctx, "remove sandbox settings", "sandbox", id, "err", err)
	}
}

// uncacheRecord drops id's record from the cache (deleted in the
// runtime). Other replicas drop their copy at their next re-check.
func (m *Manager) uncacheRecord(id string) {
	m.recs.mu.Lock()
	next := m.copyRecordsLocked()
	delete(next, id)
	m.recs.byID.Store(&next)
	m.recs.mu.Unlock()
	m.recs.tried.Delete(id)
}

// empty reports whether s sets nothing.
func (s Settings) empty() bool {
	return s.Public == nil && s.KeepUpUntil.IsZero() && len(s.Links) == 0
}

// errLeaveRecord: rewriteRecord's next wants the record left as it is.
var errLeaveRecord = errors.New("leave the record")

// rewriteRecord replaces sandbox id's record, read fresh, with what next
// makes of it (nil: delete it; errLeaveRecord: leave it), only if no
// other writer came since the read; if one did, it reads again and
// retries. next's other errors are returned as they are.
func (m *Manager) rewriteRecord(ctx context.Context, id string, next func(cur cachedRecord) (*storedRecord, error)) error {
	rs := m.caps.Records
	if rs == nil {
		return nil
	}
	for try := 0; ; try++ {
		cur, err := m.loadRecord(ctx, id)
		if err != nil {
			return err
		}
		want, err := next(cur)
		switch {
		case errors.Is(err, errLeaveRecord):
			return nil
		case err != nil:
			return err
		case want == nil && cur.version == "":
			return nil
		case want == nil:
			if err = rs.DeleteRecord(ctx, id, cur.version, m.createLabels()); err == nil {
				m.uncacheRecord(id)
			}
		default:
			err = m.putRecord(ctx, id, cur.version, *want)
		}
		if errors.Is(err, runtime.ErrConflict) && try < maxSettingsTries {
			// Another writer (maybe another replica) came first: read
			// again after a short random pause, so racers spread out.
			if err := runtime.Sleep(ctx, time.Duration(5+mrand.IntN(20*(try+1)))*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		return err
	}
}

// putRecord writes rec as sandbox id's record over version prev and
// caches it.
func (m *Manager) putRecord(ctx context.Context, id, prev string, rec storedRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("record of %s: %w", id, err)
	}
	wrote := m.now()
	v, err := m.caps.Records.PutRecord(ctx, id, prev, data, m.recordLabels(id))
	if err != nil {
		return err
	}
	m.cacheRecord(id, cachedRecord{s: rec.Settings, removed: rec.Removed, version: v, read: wrote}, true)
	return nil
}

// errRemovedMeanwhile fails a wake whose sandbox was removed (a DELETE)
// after it began.
var errRemovedMeanwhile = fmt.Errorf("%w: removed while it was starting", ErrNoContainer)

// readMark reads the removal mark the wake's baseline is (once, before
// its first action; a create that is the first action takes it in
// clearForCreate instead). If the record cannot be read, the wake goes on
// without one (markErr): a start or an unpause of the container there
// needs none, since a DELETE's lookup finds that container; absent makes
// no container without one.
func (r *runner) readMark(ctx context.Context) {
	r.marked = true
	if r.m.caps.Records == nil {
		return
	}
	cr, err := r.m.loadRecord(ctx, r.id)
	if err != nil {
		r.markErr = fmt.Errorf("read the record of %s: %w", r.id, err)
		return
	}
	r.mark = markOf(cr)
}

// clearForCreate clears the record before a create: a new sandbox under
// the id of one removed behind the manager's back (before a re-check
// dropped its record) never inherits its settings or share links. The
// record is read fresh. If the wake has no baseline yet (the create is
// its first action: run skips readMark for a missing container), that
// read is the baseline: a create reads the record twice, not three times
// (the top of this file says why that is enough). Otherwise, and on a
// re-read after a conflicting write, a mark newer than the baseline is a
// DELETE since the wake began.
func (r *runner) clearForCreate(ctx context.Context) error {
	err := r.m.clearRecord(ctx, r.id, func(mark string) error {
		switch {
		case !r.marked:
			r.marked, r.mark = true, mark
		case r.newMark(mark):
			r.removeMade(ctx) // a retried create's first container
			return errRemovedMeanwhile
		}
		return nil
	})
	if !r.marked {
		// The record was not read: the runtime keeps none (nil), or
		// the read failed, and then there is no baseline (readMark).
		r.marked = true
		if err != nil {
			r.markErr = fmt.Errorf("read the record of %s: %w", r.id, err)
			return r.markErr
		}
	}
	switch {
	case errors.Is(err, errRemovedMeanwhile):
		return err
	case err != nil:
		return fmt.Errorf("clear the settings a removed sandbox left: %w", err)
	}
	return nil
}

// newMark reports whether mark (read since readMark) is a DELETE's that
// came after the wake began. A mark gone since is none: only a clear of
// an old one or of an orphan record deletes it.
func (r *runner) newMark(mark string) bool { return mark != "" && mark != r.mark }

// removedElsewhere fails the wake if the sandbox's record, read fresh,
// carries a removal mark newer than the wake (a DELETE, on any replica),
// removing the container the wake made. A wake that did not act (no
// baseline read), or had no baseline (it made nothing), never checks. If
// the record cannot be read, a wake that made a container fails too, and
// removes it: a DELETE may have come; one that made none goes on (a
// DELETE's lookup finds the container it started).
func (r *runner) removedElsewhere(ctx context.Context) error {
	if !r.marked || r.markErr != nil || r.m.caps.Records == nil {
		return nil
	}
	cr, err := r.m.loadRecord(ctx, r.id)
	switch {
	case err == nil && !r.newMark(markOf(cr)):
		return nil
	case err != nil && r.made == "":
		return nil
	}
	r.removeMade(ctx)
	if err != nil {
		return fmt.Errorf("read the record of %s: %w", r.id, err)
	}
	return errRemovedMeanwhile
}

// removeMade removes the container this wake created or claimed, if any.
func (r *runner) removeMade(ctx context.Context) {
	if r.made == "" {
		return
	}
	if err := r.m.eng.Remove(ctx, r.made); err != nil && !errors.Is(err, ErrNoContainer) {
		r.log.WarnContext(ctx, "removing a container made while the sandbox was removed failed", "err", err)
	}
}
