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
// A new sandbox's create clears the record first (clearForCreate); where
// the create is the wake's first action, that read is its baseline: it
// still comes before the wake makes anything, which is all the argument
// asks. A re-read after a conflicting clear is compared with the
// baseline, never taken as a new one. The mark must outlive every wake
// that may need to see it (records/marks.go).

// errRemovedMeanwhile fails a wake whose sandbox was removed (a DELETE)
// after it began.
var errRemovedMeanwhile = fmt.Errorf("%w: removed while it was starting", runtime.ErrNotFound)

// readMark reads the wake's baseline mark. If the record cannot be read,
// the wake goes on without one (markErr): a DELETE's lookup finds the
// container it starts, and absent makes no container without one.
func (r *runner) readMark(ctx context.Context) {
	r.marked = true
	mark, err := r.m.recs.ReadMark(ctx, r.id)
	if err != nil {
		r.markErr = fmt.Errorf("read the record of %s: %w", r.id, err)
		return
	}
	r.mark = mark
}

// clearForCreate clears the record before a create, so a new sandbox never
// inherits the settings or links of one removed behind the manager's back.
// Its read is the baseline if the wake has none yet; otherwise a mark
// newer than the baseline is a DELETE since the wake began.
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
		// None is kept, or the read failed: no baseline (readMark).
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

// newMark reports whether mark is a DELETE's since the wake began. A mark
// gone since is none: only a clear of an old or orphan record deletes it.
func (r *runner) newMark(mark string) bool { return mark != "" && mark != r.mark }

// removedElsewhere fails the wake, removing what it made, if the record
// read fresh has a mark newer than the wake. A wake without a baseline
// never checks. If the record cannot be read, a wake that made a container
// fails too (a DELETE may have come); one that made none goes on.
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
