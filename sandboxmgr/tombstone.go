package sandboxmgr

import (
	"context"
	"errors"
	"fmt"

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
//     (by ID, never another's) and fails with runtime.ErrNotFound.
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
// The mark must outlive every wake that may need to see it: package
// records keeps it long enough (records/marks.go).

// errRemovedMeanwhile fails a wake whose sandbox was removed (a DELETE)
// after it began.
var errRemovedMeanwhile = fmt.Errorf("%w: removed while it was starting", runtime.ErrNotFound)

// readMark reads the removal mark the wake's baseline is (once, before
// its first action; a create that is the first action takes it in
// clearForCreate instead). If the record cannot be read, the wake goes on
// without one (markErr): a start or an unpause of the container there
// needs none, since a DELETE's lookup finds that container; absent makes
// no container without one.
func (r *runner) readMark(ctx context.Context) {
	r.marked = true
	mark, err := r.m.recs.ReadMark(ctx, r.id)
	if err != nil {
		r.markErr = fmt.Errorf("read the record of %s: %w", r.id, err)
		return
	}
	r.mark = mark
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
	err := r.m.recs.Clear(ctx, r.id, func(mark string) error {
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
		// The record was not read: none is kept, or the read failed, and then there is no baseline (readMark).
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
	if !r.marked || r.markErr != nil {
		return nil
	}
	mark, err := r.m.recs.ReadMark(ctx, r.id)
	switch {
	case err == nil && !r.newMark(mark):
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
	if err := r.m.rt.Remove(ctx, r.made); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		r.log.WarnContext(ctx, "removing a container made while the sandbox was removed failed", "err", err)
	}
}
