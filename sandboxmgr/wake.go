package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Ensure returns the endpoint of sandbox id, waking (start/unpause) or
// creating it from tpl as needed, and waits until it is ready.
//
// A cached ready endpoint is returned without any Docker call. Otherwise
// all concurrent callers for id share one wake, which runs detached from
// ctx and is bounded by tpl's ready timeout; each caller waits only as long
// as its own ctx allows. tpl may be nil when the caller only wants an
// existing sandbox: then a missing container is ErrNoContainer.
//
// Errors wrap ErrInvalidID, ErrNoContainer, ErrUnavailable, ErrCapacity,
// ErrNotReady, ErrNoImage, ErrForeignContainer (the name is on a container
// this manager does not own; it is left alone), or ctx's error.
func (m *Manager) Ensure(ctx context.Context, id string, tpl *config.Template) (Endpoint, error) {
	return m.EnsureWith(ctx, id, tpl, Options{})
}

// Options adjust one EnsureWith call.
type Options struct {
	// NoWake: if the sandbox is stopped, paused or absent and no wake is in
	// progress, fail with ErrAsleep instead of waking or creating it. A wake
	// already in progress (started by another caller) is waited for as
	// usual, and a running but not yet cached sandbox is probed. Browsers'
	// background fetches and HMR reconnect loops use it, so a tab left open
	// does not keep a sandbox awake all night (#7).
	NoWake bool
	// Subject is who the wake is for (a token's sub; "" for none). A
	// container created for it carries LabelSubject (SubjectKey).
	Subject string
	// SubjectMaxRunning, with Subject, bounds how many of the subject's
	// sandboxes run: a wake that would create, claim, start or unpause
	// one while the runtime lists that many of the subject's instances
	// running fails with *SubjectLimitError. The runtime's list is shared
	// by every replica; two replicas deciding at the same moment can each
	// admit one. Such a wake never claims from the warm pool (a claimed
	// container's labels cannot be changed on Docker, so it could not be
	// counted).
	SubjectMaxRunning int
	// OnCreate, if set, is called right before a container is created for
	// the sandbox (not for a start or unpause). Its error fails the wake
	// (wrapped; errors.Is sees it); the gateway charges per-subject create
	// quotas here. In a shared wake only the caller that started it counts.
	OnCreate func() error
	// NoCreate: a missing sandbox is not created (nor claimed from the
	// pool); Ensure fails with ErrNoContainer. The gateway sets it for
	// requests without a token: public means "reachable without a token",
	// never "anyone may create" (#21).
	NoCreate bool
	// MayServe, if set, is asked with the sandbox's own template (its
	// instance's label) before a cached endpoint is handed out, before an
	// existing container is woken, and on the endpoint a shared wake
	// returns; its error fails Ensure (wrapped). The gateway refuses
	// anonymous requests for sandboxes whose template is not public with
	// it, whatever its cache said when it decided the request was public.
	MayServe func(template string) error
	// Metadata labels a sandbox created by this wake (CheckMetadata must
	// accept it); an existing one keeps its own. Such a wake never claims
	// from the warm pool: a claimed container's labels cannot be changed
	// on Docker.
	Metadata map[string]string
}

// EnsureWith is Ensure with options. Errors are Ensure's plus ErrAsleep and
// whatever OnCreate returns.
func (m *Manager) EnsureWith(ctx context.Context, id string, tpl *config.Template, opts Options) (Endpoint, error) {
	ep, err := m.ensureWith(ctx, id, tpl, opts)
	if err == nil && opts.MayServe != nil {
		if err = opts.MayServe(ep.Template); err != nil {
			return Endpoint{}, fmt.Errorf("sandbox %s: %w", id, err)
		}
	}
	return ep, err
}

func (m *Manager) ensureWith(ctx context.Context, id string, tpl *config.Template, opts Options) (Endpoint, error) {
	if sb := m.lookup(id); sb != nil {
		if ep := sb.ep.Load(); ep != nil {
			if !m.distrusted() {
				return *ep, nil
			}
			ok, err := m.stillServes(ctx, sb, ep)
			if err != nil {
				return Endpoint{}, fmt.Errorf("sandbox %s: %w", id, err)
			}
			if ok {
				return *ep, nil
			}
		}
	}
	if !config.ValidID(id) {
		return Endpoint{}, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	if opts.NoWake {
		if err := m.mayJoin(ctx, id); err != nil {
			return Endpoint{}, err
		}
	}
	ch := m.wakes.DoChan(id, func() (any, error) {
		return m.wakeDetached(ctx, id, tpl, opts)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return Endpoint{}, r.Err
		}
		return r.Val.(Endpoint), nil
	case <-ctx.Done():
		return Endpoint{}, fmt.Errorf("sandbox %s: %w", id, context.Cause(ctx))
	}
}

// mayJoin decides for a NoWake caller: nil if a wake of id is in progress
// (join it) or its container is running (a probe, not a wake); ErrAsleep
// otherwise. A wake that ends between this check and the caller joining
// makes the caller start a new one; that one finds the container running
// unless the first failed, a window too small to keep a sandbox awake.
func (m *Manager) mayJoin(ctx context.Context, id string) error {
	if sb := m.lookup(id); sb != nil && sb.waking.Load() > 0 {
		return nil
	}
	c, err := m.inspectOwned(ctx, ContainerName(id))
	switch {
	case errors.Is(err, ErrNoContainer):
		return fmt.Errorf("sandbox %s: %w (no container)", id, ErrAsleep)
	case err != nil:
		return fmt.Errorf("sandbox %s: %w", id, err)
	case c.State == stateRunning:
		return nil
	}
	if sb := m.lookup(id); sb != nil && sb.waking.Load() > 0 {
		return nil // a wake started while we looked
	}
	return fmt.Errorf("sandbox %s: %w (%s)", id, ErrAsleep, c.State)
}

// wakeDetached runs one wake for id: detached from the first caller's
// cancellation (it serves every caller), bounded by the ready timeout, and
// canceled by Close, which waits for it.
func (m *Manager) wakeDetached(ctx context.Context, id string, tpl *config.Template, opts Options) (Endpoint, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Endpoint{}, fmt.Errorf("sandbox %s: manager closed: %w", id, ErrUnavailable)
	}
	m.wg.Add(1)
	sb := m.sandboxLocked(id) // the record this wake passes down
	m.mu.Unlock()
	defer m.wg.Done()
	sb.waking.Add(1)
	defer sb.waking.Add(-1)
	sb.op.Lock() // a reaper stop in progress finishes first
	defer sb.op.Unlock()

	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	defer context.AfterFunc(m.ctx, func() { cancel(context.Canceled) })()
	clock := startReadyClock(readyTimeout(tpl), func() { cancel(errReadyTimeout) })
	defer clock.stop()
	ctx = context.WithValue(ctx, readyClockKey{}, clock)

	m.beginDiag(sb, tpl)
	m.setPhase(sb, PhaseQueued, "")
	ep, err := m.wake(ctx, sb, tpl, opts)
	if err == nil {
		m.setPhase(sb, PhaseReady, "")
		return ep, nil
	}
	defer func() { m.setFailed(sb, err) }()
	switch {
	case m.ctx.Err() != nil:
		err = fmt.Errorf("manager closed: %w: %w", ErrUnavailable, err)
	case context.Cause(ctx) == errReadyTimeout &&
		!errors.Is(err, ErrNotReady) && !errors.Is(err, ErrCapacity) && !errors.Is(err, ErrUnavailable):
		err = fmt.Errorf("%w: %w: %w", ErrNotReady, errReadyTimeout, err)
	}
	if m.ctx.Err() == nil {
		err = m.explainFailure(id, err, context.Cause(ctx) == errReadyTimeout)
	}
	return Endpoint{}, fmt.Errorf("sandbox %s: %w", id, err)
}

// errReadyTimeout ends a wake that took longer than its template's ready
// timeout (time queued for a start slot not counted).
var errReadyTimeout = fmt.Errorf("ready timeout: %w", context.DeadlineExceeded)

type readyClockKey struct{}

// readyClock is a wake's deadline that stops while the wake waits in the
// start queue (acquireStart pauses and resumes it; a wake waits there at
// most once at a time).
type readyClock struct {
	mu    sync.Mutex
	t     *time.Timer
	left  time.Duration // while paused: what remains
	since time.Time     // while running: when it (re)started
	done  bool          // fired or stopped: never restarts
}

func startReadyClock(d time.Duration, expire func()) *readyClock {
	return &readyClock{t: time.AfterFunc(d, expire), left: d, since: time.Now()}
}

func (c *readyClock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		if c.t.Stop() {
			c.left -= time.Since(c.since)
		} else {
			c.done = true // it fired
		}
	}
}

func (c *readyClock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		c.since = time.Now()
		c.t.Reset(max(c.left, 0))
	}
}

func (c *readyClock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t.Stop()
	c.done = true
}

func readyTimeout(tpl *config.Template) time.Duration {
	if tpl != nil && tpl.Ready.Timeout > 0 {
		return tpl.Ready.Timeout.D()
	}
	return config.DefaultTemplateSettings().Ready.Timeout.D()
}

// wake drives id's container to running, then waits for its app.
func (m *Manager) wake(ctx context.Context, sb *sandbox, tpl *config.Template, opts Options) (Endpoint, error) {
	log := m.log.With("sandbox", sb.id)
	t0 := m.now()
	r := runner{m: m, sb: sb, id: sb.id, name: ContainerName(sb.id), tpl: tpl, onCreate: opts.OnCreate, noCreate: opts.NoCreate,
		subject: opts.Subject, subjectMax: opts.SubjectMaxRunning,
		mayServe: opts.MayServe, meta: opts.Metadata, log: log, action: "found running"}
	c, err := r.run(ctx)
	if r.claimed {
		// Refill after this wake, not during it: the refill's create and
		// start would compete with the claim's inspect and probe for the
		// Docker daemon.
		defer m.kickPool()
	}
	if err != nil {
		return Endpoint{}, err
	}
	ep, err := m.awaitApp(ctx, sb, tpl, c)
	if err != nil {
		return Endpoint{}, err
	}
	took := m.now().Sub(t0)
	log.InfoContext(ctx, "sandbox ready", "action", r.action, "took", took, "addr", ep.Addr)
	if kind := coldStartKind(r.action); kind != "" {
		sb.countWake(took)
		m.coldStart(kind, took)
		m.wakeTimes.record(ep.Template, took)
	}
	return ep, nil
}

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
	// subjectChecked once the cap was checked for this wake.
	subject        string
	subjectMax     int
	subjectChecked bool
	noCreate       bool                        // Options.NoCreate
	mayServe       func(template string) error // Options.MayServe
	meta           map[string]string           // Options.Metadata
	log            *slog.Logger
	action         string
	starts         int  // a container that exits at once is not restarted forever
	claimed        bool // claimed from the warm pool
}

// run returns the running container. Every container acted on was
// inspected and found owned; calls take its ID, not the name another
// container could take meanwhile.
func (r *runner) run(ctx context.Context) (ctrInfo, error) {
	m := r.m
	c, err := m.inspectOwned(ctx, r.name)
	if err == nil && r.mayServe != nil {
		// The instance's own template decides, before anything wakes.
		if err := r.mayServe(c.Labels[LabelTemplate]); err != nil {
			return ctrInfo{}, err
		}
	}
	for err != nil || c.State != stateRunning {
		if !r.subjectChecked && r.subjectMax > 0 && r.subject != "" && !errors.Is(err, ErrForeignContainer) &&
			(errors.Is(err, ErrNoContainer) || err == nil && slices.Contains([]string{statePaused, stateExited, stateCreated}, c.State)) {
			// About to make one more of the subject's sandboxes run.
			r.subjectChecked = true
			if lerr := r.m.checkSubject(ctx, r.subject, r.subjectMax); lerr != nil {
				return ctrInfo{}, lerr
			}
		}
		switch {
		case errors.Is(err, ErrForeignContainer):
			m.disown(r.id)
			return ctrInfo{}, err
		case errors.Is(err, ErrNoContainer):
			var final bool
			if final, err = r.absent(ctx, false); final {
				return ctrInfo{}, err
			}
		case err != nil:
			return ctrInfo{}, err
		case c.Kept && r.starts >= 2:
			return ctrInfo{}, fmt.Errorf("%w: %w: the pods of %s ended right after start", ErrNotReady, errCrashLoop, r.name)
		case c.Kept:
			// Kubernetes: the pod is gone, its workspace kept. A new pod
			// on it is a wake of this sandbox, not a new one.
			if r.tpl == nil {
				r.tpl = m.cfg.Templates(c.Labels[LabelTemplate])
			}
			var final bool
			if final, err = r.absent(ctx, true); final {
				return ctrInfo{}, err
			}
		case c.State == statePaused:
			r.action = "unpaused"
			m.setPhase(r.sb, PhaseStarting, "")
			err = m.eng.Resume(ctx, c.ID)
		case c.State == stateExited && r.starts >= 2:
			return ctrInfo{}, fmt.Errorf("%w: %w: container %s exited with code %d right after start", ErrNotReady, errCrashLoop, r.name, c.ExitCode)
		case c.State == stateCreated && r.starts > 0:
			// Still "created" after a start: another caller's start (a
			// replica that won the create) is in flight. Let it finish.
			err = sleep(ctx, 20*time.Millisecond)
		case c.State == stateCreated || c.State == stateExited:
			r.starts++
			r.action = "started"
			err = m.start(ctx, r.sb, c.ID)
		case c.State == stateRestarting || c.State == stateRemoving:
			err = sleep(ctx, 50*time.Millisecond)
		default:
			return ctrInfo{}, fmt.Errorf("container %s is %s (remove it to recreate)", r.name, c.State)
		}
		if err != nil && !errors.Is(err, ErrNoContainer) {
			// Someone else may have changed it meanwhile (a start or
			// unpause racing ours); it only matters if it is not running now.
			if c2, ierr := m.inspectOwned(ctx, r.name); ierr == nil && c2.State == stateRunning {
				c, err = c2, nil
				continue
			}
			return ctrInfo{}, err
		}
		c, err = m.inspectOwned(ctx, r.name)
	}
	return c, nil
}

// absent makes the missing container: claimed from the warm pool or
// created; a create that raced another caller (maybe another replica)
// waits for that one's container instead. kept: only the sandbox's
// workspace is left, so the container is created on it, neither charged
// as a new sandbox nor taken from the pool. final: the wake fails with
// err (no template, the create quota), whatever the container does
// meanwhile.
func (r *runner) absent(ctx context.Context, kept bool) (final bool, err error) {
	m, tpl := r.m, r.tpl
	if tpl == nil {
		return true, fmt.Errorf("%w (no template to create it from)", ErrNoContainer)
	}
	if r.noCreate && !kept {
		return true, fmt.Errorf("%w (creating it takes a token or the API)", ErrNoContainer)
	}
	switch {
	case kept:
		r.action = "started"
	case r.action != "adopted":
		r.action = "created"
	}
	if r.onCreate != nil && !kept {
		if err := r.onCreate(); err != nil {
			return true, err
		}
		r.onCreate = nil // a create that raced and is retried counts once
	}
	if !kept && r.action == "created" {
		if err := m.dropRecord(ctx, r.id); err != nil { // settings.go
			return true, fmt.Errorf("clear the settings a removed sandbox left: %w", err)
		}
	}
	err = errNoPool
	if tpl.Pool > 0 && tpl.Workspace == nil && r.subjectMax == 0 && len(r.meta) == 0 && (r.action == "created" || r.action == "adopted") {
		if err = m.claim(ctx, r.id, tpl); err == nil {
			r.action, r.claimed = "claimed from pool", true
		} else if !errors.Is(err, errNameTaken) && !errors.Is(err, errNoPool) {
			r.log.WarnContext(ctx, "pool claim failed, creating", "err", err)
			err = errNoPool
		}
	}
	if errors.Is(err, errNoPool) {
		if err = m.create(ctx, r.sb, tpl, r.subject, r.meta); err == nil {
			r.starts++
		}
	}
	if errors.Is(err, errNameTaken) {
		// Another caller owns the name and is creating it: wait for that
		// container, never make a second. Docker reserves the name before
		// the container can be inspected, so give the other create a
		// moment.
		if r.action != "adopted" {
			r.log.InfoContext(ctx, "create raced, adopting the other container")
		}
		r.action = "adopted"
		err = sleep(ctx, 20*time.Millisecond)
	}
	return false, err
}

// awaitApp records running container c as id's current run, waits until
// its app is ready and caches its endpoint.
func (m *Manager) awaitApp(ctx context.Context, sb *sandbox, tpl *config.Template, c ctrInfo) (Endpoint, error) {
	id, name := sb.id, ContainerName(sb.id)
	eff := m.effectiveTemplate(tpl, c)
	if c.IP == "" {
		return Endpoint{}, fmt.Errorf("container %s has no address on network %s", name, m.cfg.Network)
	}
	inst := instanceOf(c)
	if inst == "" {
		return Endpoint{}, fmt.Errorf("container %s is running but reports no start time", name)
	}
	ep := Endpoint{ID: id, Addr: endpointAddr(c, eff.Port), Template: c.Labels[LabelTemplate], Instance: inst}
	m.mu.Lock()
	gone := []string{m.observeLocked(sb, c)} // a run we handed out before is over
	// The address is this run's from now on, before the app answers on it:
	// a record another sandbox left on it (its container ended unseen) must
	// not send its users here (instance.go).
	gone = append(gone, m.claimAddrLocked(sb, ep.Addr)...)
	m.mu.Unlock()
	m.gone(gone...)

	m.setPhase(sb, PhaseWaitingPort, fmt.Sprintf("waiting for port %d", eff.Port))
	stopLogs := m.watchLogs(ctx, sb, c.ID) // shown live on the waiting page
	defer stopLogs()
	err := waitReady(ctx, ep.Addr, eff.Ready.Path, func(ctx context.Context) error {
		now, err := m.eng.Lookup(ctx, c.ID)
		switch {
		case err != nil:
			return err
		case now.State == stateExited || now.State == stateDead:
			return fmt.Errorf("%w: %w: container %s %s with code %d", ErrNotReady, errExited, name, now.State, now.ExitCode)
		case now.Name != name:
			return fmt.Errorf("%w: container %s was renamed to %s while starting", ErrNotReady, name, now.Name)
		}
		return nil
	})
	if err != nil {
		return Endpoint{}, err
	}
	// The probe only says something answers on the address. A run that
	// ended while it was probed (liveness is checked every aliveEvery)
	// left its address to whichever container the runtime started next,
	// and that one's app may be what answered: look once more before the
	// endpoint is handed out (attack21).
	if now, err := m.eng.Lookup(ctx, c.ID); err != nil {
		return Endpoint{}, err
	} else if now.State != stateRunning || instanceOf(now) != inst || now.IP != "" && now.IP != c.IP {
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
func (m *Manager) effectiveTemplate(tpl *config.Template, c ctrInfo) *config.Template {
	if tpl != nil {
		return tpl
	}
	if t := m.cfg.Templates(c.Labels[LabelTemplate]); t != nil {
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
	if err := m.eng.Start(ctx, ctr); err != nil {
		return err
	}
	m.markRunning(sb)
	return nil
}

// refreshStates re-reads every managed container's state from Docker.
func (m *Manager) refreshStates(ctx context.Context) error {
	list, err := m.listOwned(ctx)
	if err != nil {
		return err
	}
	states := make(map[string]ctrInfo, len(list))
	for _, c := range list {
		if id, ok := idFromName(c.Name, c.Labels[LabelPool]); ok {
			states[id] = c
		}
	}
	var gone []string
	m.mu.Lock()
	for id, sb := range m.sandboxes {
		sb.state = states[id].State
		switch {
		case sb.state != stateRunning:
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
