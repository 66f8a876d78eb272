package records

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Removal marks (tombstones). A DELETE replaces a sandbox's settings and
// links with a mark every replica's wake reads fresh (sandboxmgr's
// tombstone.go says why). Nothing here deletes a record whose mark is
// younger than markLife, longer than any wake, and deletions are
// conditional on the version read, so a mark written meanwhile survives.
// Older marks go with the next clear or settings write: none pile up.

// minMarkLife is the least time a removal mark is kept.
const minMarkLife = 10 * time.Minute

// markLife is how long a removal mark is kept at least: twice the longest
// wake, never under minMarkLife.
func (r *Records) markLife() time.Duration {
	if r.o.LongestWake == nil {
		return minMarkLife
	}
	return max(minMarkLife, 2*r.o.LongestWake())
}

// liveMark is m unless it is older than markLife (then nil).
func (r *Records) liveMark(m *mark) *mark {
	if m == nil || r.now().Sub(m.At) > r.markLife() {
		return nil
	}
	return m
}

func newMarkID() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// markID is the ID of c's removal mark; "" if it has none.
func markID(c cached) string {
	if c.removed == nil {
		return ""
	}
	return c.removed.ID
}

// Mark writes a new removal mark into id's record in place of its settings
// and links (a DELETE, before its lookup). Another scope's record under
// the name is left alone (nil): no wake of this scope reads it either.
func (r *Records) Mark(ctx context.Context, id string) error {
	if r == nil || r.store == nil {
		return nil
	}
	m := &mark{ID: newMarkID(), At: r.now()}
	err := r.rewrite(ctx, id, func(cached) (*cached, error) { return &cached{removed: m}, nil })
	if errors.Is(err, ErrForeignRecord) {
		r.o.Log.WarnContext(ctx, "removal mark not written: another gateway's record holds the name", "sandbox", id, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark %s removed: %w", id, err)
	}
	return nil
}

// ReadMark reads id's record fresh and returns its mark's ID ("" if none).
func (r *Records) ReadMark(ctx context.Context, id string) (string, error) {
	if r == nil || r.store == nil {
		return "", nil
	}
	c, err := r.load(ctx, id)
	if err != nil {
		return "", err
	}
	return markID(c), nil
}

// Clear drops id's settings and links, and a mark older than markLife,
// from its record read fresh, deleting it if left empty. check, if set,
// sees each read's mark ID first; its error stops the clear.
func (r *Records) Clear(ctx context.Context, id string, check func(mark string) error) error {
	if r == nil || r.store == nil {
		return nil
	}
	return r.rewrite(ctx, id, func(cur cached) (*cached, error) {
		if check != nil {
			if err := check(markID(cur)); err != nil {
				return nil, err
			}
		}
		live := r.liveMark(cur.removed)
		switch {
		case cur.version == "":
			return nil, errLeave // none
		case live == nil:
			return nil, nil
		case cur.s.empty():
			return nil, errLeave // a live mark alone: already clear
		}
		return &cached{removed: live}, nil
	})
}

// DropOrphans removes the records in l of sandboxes keep says no longer
// exist, but none with a live mark. l was listed before the caller learned
// which exist, and deletions are conditional on the version listed, so no
// record written since goes. It stops at ctx's end, leaving the rest to
// the next re-check.
func (r *Records) DropOrphans(ctx context.Context, l Listing, keep func(id string) bool) {
	for id, c := range l.byID {
		if ctx.Err() != nil {
			return
		}
		if r.liveMark(c.removed) != nil || keep(id) {
			continue
		}
		err := r.store.DeleteRecord(ctx, id, c.version, r.o.Labels)
		switch {
		case err == nil:
			r.uncache(id)
		case !errors.Is(err, ErrConflict): // a conflict: written since, not an orphan's
			r.o.Log.WarnContext(ctx, "remove sandbox settings", "sandbox", id, "err", err)
		}
	}
}
