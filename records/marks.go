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
// links with a mark that every replica's wake reads fresh from the store
// (sandboxmgr's tombstone.go says why that makes a DELETE hold across
// replicas). The mark must outlive every wake that may need to see it:
// nothing here deletes a record whose mark is younger than markLife,
// which is longer than any wake, and a deletion is conditional on the
// version it read, so a mark written meanwhile survives it (DropOrphans,
// a create's or the reaper's Clear). An older mark goes with the next of
// those, or the sandbox's next settings write: marks do not pile up.

// minMarkLife is the least time a removal mark is kept.
const minMarkLife = 10 * time.Minute

// markLife is how long a removal mark is kept at least: twice the longest
// a wake can take, and never under minMarkLife.
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

// Mark writes a new removal mark into sandbox id's record, in place of its
// settings and links (a DELETE, before it looks the sandbox up). A record
// of another scope under the record's name is left alone (nil): no wake
// of this scope reads a mark there either.
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

// ReadMark reads sandbox id's record fresh from the store and returns the
// ID of its removal mark ("" if none).
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

// Clear drops sandbox id's settings and links, and a removal mark older
// than markLife, from its record read fresh; a record left with nothing
// is deleted. check, if set, sees each read's mark ID ("" if none) first;
// its error stops the clear and is returned.
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

// DropOrphans removes the records in l of sandboxes that keep says no
// longer exist (removed by something else than a gateway), but not one
// whose removal mark is younger than markLife. l was listed before the
// caller learned which exist, so a record written for a sandbox made
// since is not in it; a record written since it was listed is not
// deleted either (the deletion is conditional on the version listed). It
// stops at ctx's end (the re-check's deadline) and leaves the rest to the
// next one: orphans can be many (a DELETE of any id leaves a mark).
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
