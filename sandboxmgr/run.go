package sandboxmgr

// Bringing one sandbox's container to running (runner) and its app to
// ready (awaitApp), for wake in wake.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// runner drives one sandbox's container to running: create (or claim from
// the pool) when absent, unpause, start, or wait for another caller's
// create or start. action says what it did, for the log and metrics.
type runner struct {
	m        *Manager
	sb       *sandbox // the record of the sandbox being woken
	id, name string
	tpl      *config.Template
	onCreate func() error
	// subject and subjectMax: Options.Subject and SubjectMaxRunning;
	// subjectChecked once the cap was checked for this wake, admitted then
	// the end of its admission (wake calls it when the wake ends).
	subject        string
	subjectMax     int
	subjectChecked bool
	admitted       func()
	noCreate       bool                        // Options.NoCreate
	mayServe       func(template string) error // Options.MayServe
	meta           map[string]string           // Options.Metadata
	log            *slog.Logger
	action         string
	starts         int   // a container that exits at once is not restarted forever
	claimed        bool  // claimed from the warm pool
	removals       int64 // sb.removals when the wake began (removedMeanwhile)
	// mark is the baseline removal mark, once marked (tombstone.go);
	// markErr says it could not be read. made: the container it created
	// or claimed, removed if a DELETE came meanwhile.
	mark    string
	marked  bool
	markErr error
	made    string
}

// run returns the running container. Every container acted on was
// inspected and found owned; calls take its ID, not the name another
// container could take meanwhile.
func (r *runner) run(ctx context.Context) (runtime.Instance, error) {
	m := r.m
	c, err := m.findID(ctx, r.id)
	if err == nil {
		r.name = c.Name // an earlier version's name, maybe: the instance keeps it
	}
	if err == nil && r.mayServe != nil {
		// The instance's own template decides, before anything wakes.
		if err := r.mayServe(c.Labels[runtime.LabelTemplate]); err != nil {
			return runtime.Instance{}, err
		}
	}
	for err != nil || c.State != runtime.StateRunning {
		if rerr := r.removedMeanwhile(ctx); rerr != nil {
			return runtime.Instance{}, rerr
		}
		if !r.marked && !errors.Is(err, runtime.ErrNotFound) {
			// Baseline before the first action (a create's clear reads it).
			r.readMark(ctx)
		}
		if !r.subjectChecked && r.subjectMax > 0 && r.subject != "" && !errors.Is(err, runtime.ErrForeign) &&
			(errors.Is(err, runtime.ErrNotFound) || err == nil && slices.Contains([]string{runtime.StatePaused, runtime.StateExited, runtime.StateCreated}, c.State)) {
			// About to make one more of the subject's sandboxes run.
			r.subjectChecked = true
			release, lerr := r.m.admitSubject(ctx, r.id, r.subject, r.subjectMax)
			if lerr != nil {
				return runtime.Instance{}, lerr
			}
			r.admitted = release
		}
		switch {
		case errors.Is(err, runtime.ErrForeign):
			m.disown(r.id)
			return runtime.Instance{}, err
		case errors.Is(err, runtime.ErrNotFound):
			var final bool
			if final, err = r.absent(ctx, false); final {
				return runtime.Instance{}, err
			}
		case err != nil:
			return runtime.Instance{}, err
		case c.Kept && r.starts >= 2:
			return runtime.Instance{}, fmt.Errorf("%w: %w: the pods of %s ended right after start", ErrNotReady, errCrashLoop, r.name)
		case c.Kept:
			// Kubernetes: the pod is gone, its workspace kept. A new pod
			// on it is a wake of this sandbox, not a new one.
			if r.tpl == nil {
				r.tpl = m.cfg.Templates(c.Labels[runtime.LabelTemplate])
			}
			var final bool
			if final, err = r.absent(ctx, true); final {
				return runtime.Instance{}, err
			}
		case c.State == runtime.StatePaused:
			r.action = "unpaused"
			m.setPhase(r.sb, PhaseStarting, "")
			err = m.rt.Resume(ctx, c.ID)
		case c.State == runtime.StateExited && r.starts >= 2:
			return runtime.Instance{}, fmt.Errorf("%w: %w: container %s exited with code %d right after start", ErrNotReady, errCrashLoop, r.name, c.ExitCode)
		case c.State == runtime.StateCreated && r.starts > 0:
			// Still "created" after a start: another caller's start (a
			// replica that won the create) is in flight. Let it finish.
			err = sleep(ctx, 20*time.Millisecond)
		case c.State == runtime.StateCreated || c.State == runtime.StateExited:
			r.starts++
			r.action = "started"
			err = m.start(ctx, r.sb, c.ID)
		case c.State == runtime.StateRestarting || c.State == runtime.StateRemoving:
			err = sleep(ctx, 50*time.Millisecond)
		default:
			return runtime.Instance{}, fmt.Errorf("container %s is %s (remove it to recreate)", r.name, c.State)
		}
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			// Someone else may have changed it meanwhile (a start or
			// unpause racing ours); it only matters if it is not running now.
			if c2, ierr := m.inspectOwned(ctx, r.name); ierr == nil && c2.State == runtime.StateRunning {
				c, err = c2, nil
				continue
			}
			if rerr := r.removedMeanwhile(ctx); rerr != nil {
				return runtime.Instance{}, rerr // "marked for removal": a DELETE's, not a failure
			}
			if rerr := r.removedElsewhere(ctx); rerr != nil {
				return runtime.Instance{}, rerr // the same, on another replica
			}
			return runtime.Instance{}, err
		}
		c, err = m.inspectOwned(ctx, r.name)
	}
	if err := r.removedMeanwhile(ctx); err != nil {
		return runtime.Instance{}, err
	}
	// Running now, not yet handed out: a DELETE on another replica whose
	// mark this read misses came after it, and its lookup finds c.
	if err := r.removedElsewhere(ctx); err != nil {
		return runtime.Instance{}, err
	}
	return c, nil
}

// removedMeanwhile fails the wake, removing its container, if Remove was
// called since it began: a DELETE during a create or between create and
// start must not leave the sandbox running (#23).
func (r *runner) removedMeanwhile(ctx context.Context) error {
	if r.sb.removals.Load() == r.removals {
		return nil
	}
	if c, err := r.m.inspectOwned(ctx, r.name); err == nil {
		if err := r.m.rt.Remove(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			r.log.WarnContext(ctx, "removing a container made while the sandbox was removed failed", "err", err)
		}
	}
	return errRemovedMeanwhile
}

// absent claims or creates the missing container; a create that raced
// another caller waits for that one's. kept: only the workspace is left,
// so it is neither charged as new nor taken from the pool. final: the
// wake fails with err whatever the container does meanwhile.
func (r *runner) absent(ctx context.Context, kept bool) (final bool, err error) {
	m, tpl := r.m, r.tpl
	if tpl == nil {
		return true, fmt.Errorf("%w (no template to create it from)", runtime.ErrNotFound)
	}
	if r.noCreate && !kept {
		return true, fmt.Errorf("%w (creating it takes a token or the API)", runtime.ErrNotFound)
	}
	if r.markErr != nil {
		// Without a baseline it could not see a DELETE (tombstone.go).
		return true, r.markErr
	}
	switch {
	case kept:
		r.action = "started"
	case r.action != "adopted":
		r.action = "created"
	}
	if !kept && r.action == "created" {
		// Before OnCreate: maybe the baseline read (tombstone.go).
		if err := r.clearForCreate(ctx); err != nil {
			return true, err
		}
	}
	if r.onCreate != nil && !kept {
		if err := r.onCreate(); err != nil {
			return true, err
		}
		r.onCreate = nil // a create that raced and is retried counts once
	}
	err = errNoPool
	if tpl.Pool > 0 && tpl.Workspace == nil && r.subjectMax == 0 && len(r.meta) == 0 && m.poolEnv(tpl) && (r.action == "created" || r.action == "adopted") {
		var made string
		if made, err = r.claim(ctx, tpl); err == nil {
			r.action, r.claimed, r.made = "claimed from pool", true, made
		} else if errors.Is(err, ErrCapacity) {
			return true, err // a create would find no room either
		} else if !errors.Is(err, runtime.ErrNameTaken) && !errors.Is(err, errNoPool) {
			r.log.WarnContext(ctx, "pool claim failed, creating", "err", err)
			err = errNoPool
		}
	}
	if errors.Is(err, errNoPool) {
		var made string
		if made, err = m.create(ctx, r.sb, tpl, r.subject, r.meta); made != "" {
			r.made = made // even if its start failed
		}
		if err == nil {
			r.starts++
		}
	}
	if errors.Is(err, runtime.ErrNameTaken) {
		// Another caller is creating it: wait for that one, never make a
		// second (Docker reserves the name before it can be inspected).
		if r.action != "adopted" {
			r.log.InfoContext(ctx, "create raced, adopting the other container")
		}
		r.action = "adopted"
		err = sleep(ctx, 20*time.Millisecond)
	}
	return false, err
}

// claim claims a pool container for the sandbox. A claimed container runs
// already; from the claim on it is a sandbox, counted against MaxRunning
// like a start (reserveRunning), so a pool does not let more run.
func (r *runner) claim(ctx context.Context, tpl *config.Template) (string, error) {
	unreserve, err := r.m.reserveRunning(ctx)
	if err != nil {
		return "", err
	}
	defer unreserve()
	made, err := r.m.claim(ctx, r.id, tpl)
	if err == nil {
		r.m.markRunning(r.sb)
	}
	return made, err
}

// awaitApp records running container c as id's current run, waits until
// its app is ready and caches its endpoint.
func (m *Manager) awaitApp(ctx context.Context, sb *sandbox, tpl *config.Template, c runtime.Instance) (Endpoint, error) {
	id, name := sb.id, c.Name
	eff := m.effectiveTemplate(tpl, c)
	if c.IP == "" {
		return Endpoint{}, fmt.Errorf("container %s has no address on network %s", name, m.cfg.Network)
	}
	inst := instanceOf(c)
	if inst == "" {
		return Endpoint{}, fmt.Errorf("container %s is running but reports no start time", name)
	}
	ep := Endpoint{ID: id, Addr: endpointAddr(c, eff.Port), Template: c.Labels[runtime.LabelTemplate], Instance: inst}
	m.mu.Lock()
	gone := []string{m.observeLocked(sb, c)} // a run we handed out before is over
	// The address is this run's before the app answers: another sandbox's
	// stale record must not send its users here (instance.go).
	gone = append(gone, m.claimAddrLocked(sb, ep.Addr)...)
	m.mu.Unlock()
	m.gone(gone...)

	m.setPhase(sb, PhaseWaitingPort, fmt.Sprintf("waiting for port %d", eff.Port))
	stopLogs := m.watchLogs(ctx, sb, c.ID) // shown live on the waiting page
	defer stopLogs()
	err := waitReady(ctx, ep.Addr, eff.Ready.Path, func(ctx context.Context) error {
		now, err := m.rt.Lookup(ctx, c.ID)
		switch {
		case err != nil:
			return err
		case now.State == runtime.StateExited || now.State == runtime.StateDead:
			return fmt.Errorf("%w: %w: container %s %s with code %d", ErrNotReady, errExited, name, now.State, now.ExitCode)
		case now.Name != name:
			return fmt.Errorf("%w: container %s was renamed to %s while starting", ErrNotReady, name, now.Name)
		}
		return nil
	})
	if err != nil {
		return Endpoint{}, err
	}
	// Something answered, but a run that ended while probed left its
	// address to the next container: look once more (attack21).
	if now, err := m.rt.Lookup(ctx, c.ID); err != nil {
		return Endpoint{}, err
	} else if now.State != runtime.StateRunning || instanceOf(now) != inst || now.IP != "" && now.IP != c.IP {
		return Endpoint{}, fmt.Errorf("%w: %w: container %s ended while its app was probed (%s)", ErrNotReady, errExited, name, now.State)
	}
	m.mu.Lock()
	gone = m.cacheLocked(sb, &ep)
	m.mu.Unlock()
	m.gone(gone...)
	// Ready is activity: published like a request's, so other replicas do
	// not judge a slow start idle from when it began (#26).
	sb.lastActivity.Store(m.now().UnixNano())
	return ep, nil
}

// coldStartKind maps a wake's action to the cold start it was ("" for none).
func coldStartKind(action string) string {
	switch action {
	case "created", "adopted":
		return "create"
	case "claimed from pool":
		return "pool"
	case "started", "unpaused":
		return "wake"
	}
	return ""
}

// effectiveTemplate is the template to probe c with: tpl, else the one c was
// created from, else defaults.
func (m *Manager) effectiveTemplate(tpl *config.Template, c runtime.Instance) *config.Template {
	if tpl != nil {
		return tpl
	}
	if t := m.cfg.Templates(c.Labels[runtime.LabelTemplate]); t != nil {
		return t
	}
	return &config.Template{}
}

// start starts an existing container (its ID) within the start limits.
func (m *Manager) start(ctx context.Context, sb *sandbox, ctr string) error {
	release, err := m.acquireStart(ctx)
	if err != nil {
		return err
	}
	defer release()
	m.setPhase(sb, PhaseStarting, "")
	if err := m.rt.Start(ctx, ctr); err != nil {
		return err
	}
	m.markRunning(sb)
	return nil
}

// refreshStates re-reads every owned instance's state from the runtime.
// A record updated after the list began (a start this manager made, an
// event) knows more than the list and keeps its state: a start that ended
// while the list was taken must not be counted stopped again (acquireStart
// would admit one more than MaxRunning).
func (m *Manager) refreshStates(ctx context.Context) error {
	m.mu.RLock()
	gen := m.gen
	m.mu.RUnlock()
	list, err := m.listOwned(ctx)
	if err != nil {
		return err
	}
	states := make(map[string]runtime.Instance, len(list))
	for _, c := range list {
		if id, ok := m.idFromName(c.Name, c.Labels[runtime.LabelPool]); ok {
			states[id] = c
		}
	}
	var gone []string
	m.mu.Lock()
	for id, sb := range m.sandboxes {
		if sb.seen > gen {
			continue
		}
		sb.state = states[id].State
		switch {
		case sb.state != runtime.StateRunning:
			if sb.ep.Load() != nil || sb.last != nil && sb.state == "" {
				gone = append(gone, m.dropLocked(sb))
			}
			if sb.state == "" {
				sb.last = nil
			}
		case sb.last != nil && states[id].ID != instanceContainer(sb.last.Instance):
			gone = append(gone, m.dropLocked(sb))
			sb.last = nil
		}
	}
	m.mu.Unlock()
	m.gone(gone...)
	return nil
}

var sleep = runtime.Sleep

// poolEnv reports whether tpl has its pool's env: an admin API create may
// set other values (allow_env), so it makes its own (hostile5).

func (m *Manager) poolEnv(tpl *config.Template) bool {
	pool := m.cfg.Templates(tpl.Name)
	return pool != nil && maps.Equal(pool.Env, tpl.Env)
}
