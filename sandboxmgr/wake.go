package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/previewgate/previewgate/config"
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
// ErrNotReady, ErrNoImage, or ctx's error.
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
	// OnCreate, if set, is called right before a container is created for
	// the sandbox (not for a start or unpause). Its error fails the wake
	// (wrapped; errors.Is sees it); the gateway charges per-subject create
	// quotas here. In a shared wake only the caller that started it counts.
	OnCreate func() error
}

// EnsureWith is Ensure with options. Errors are Ensure's plus ErrAsleep and
// whatever OnCreate returns.
func (m *Manager) EnsureWith(ctx context.Context, id string, tpl *config.Template, opts Options) (Endpoint, error) {
	if sb := m.lookup(id); sb != nil {
		if ep := sb.ep.Load(); ep != nil {
			return *ep, nil
		}
	}
	if !ValidID(id) {
		return Endpoint{}, fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	if opts.NoWake {
		if err := m.mayJoin(ctx, id); err != nil {
			return Endpoint{}, err
		}
	}
	ch := m.wakes.DoChan(id, func() (any, error) {
		return m.wakeDetached(ctx, id, tpl, opts.OnCreate)
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
	c, err := m.eng.Inspect(ctx, ContainerName(id))
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
func (m *Manager) wakeDetached(ctx context.Context, id string, tpl *config.Template, onCreate func() error) (Endpoint, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Endpoint{}, fmt.Errorf("sandbox %s: manager closed: %w", id, ErrUnavailable)
	}
	m.wg.Add(1)
	sb := m.sandboxLocked(id)
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

	m.setPhase(id, PhaseQueued, "")
	ep, err := m.wake(ctx, id, tpl, onCreate)
	if err == nil {
		m.setPhase(id, PhaseReady, "")
		return ep, nil
	}
	defer func() { m.setFailed(id, err) }()
	switch {
	case m.ctx.Err() != nil:
		err = fmt.Errorf("manager closed: %w: %w", ErrUnavailable, err)
	case context.Cause(ctx) == errReadyTimeout &&
		!errors.Is(err, ErrNotReady) && !errors.Is(err, ErrCapacity) && !errors.Is(err, ErrUnavailable):
		err = fmt.Errorf("%w: %w: %w", ErrNotReady, errReadyTimeout, err)
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
	return 60 * time.Second
}

// wake drives id's container to running, then waits for its app.
func (m *Manager) wake(ctx context.Context, id string, tpl *config.Template, onCreate func() error) (Endpoint, error) {
	name := ContainerName(id)
	log := m.log.With("sandbox", id)
	t0 := m.now()
	action := "found running"
	starts := 0 // a container that exits at once is not restarted forever

	c, err := m.eng.Inspect(ctx, name)
	for err != nil || c.State != stateRunning {
		switch {
		case errors.Is(err, ErrNoContainer):
			if tpl == nil {
				return Endpoint{}, fmt.Errorf("%w (no template to create it from)", ErrNoContainer)
			}
			if action != "adopted" {
				action = "created"
			}
			if onCreate != nil {
				if err := onCreate(); err != nil {
					return Endpoint{}, err
				}
				onCreate = nil // a create that raced and is retried counts once
			}
			err = errNoPool
			if tpl.Pool > 0 && action == "created" {
				if err = m.claim(ctx, id, tpl); err == nil {
					action = "claimed from pool"
					// Refill after this wake, not during it: the refill's
					// create and start would compete with the claim's
					// inspect and probe for the Docker daemon.
					defer m.kickPool()
				} else if !errors.Is(err, errNameTaken) && !errors.Is(err, errNoPool) {
					log.WarnContext(ctx, "pool claim failed, creating", "err", err)
					err = errNoPool
				}
			}
			if errors.Is(err, errNoPool) {
				err = m.create(ctx, id, tpl)
				if err == nil {
					starts++
				}
			}
			if errors.Is(err, errNameTaken) {
				// Another caller, maybe another replica, owns the name and
				// is creating it: wait for that container, never make a
				// second. Docker reserves the name before the container can
				// be inspected, so give the other create a moment.
				if action != "adopted" {
					log.InfoContext(ctx, "create raced, adopting the other container")
				}
				action = "adopted"
				err = sleep(ctx, 20*time.Millisecond)
			}
		case err != nil:
			return Endpoint{}, err
		case c.State == statePaused:
			action = "unpaused"
			m.setPhase(id, PhaseStarting, "")
			err = m.eng.Unpause(ctx, name)
		case c.State == stateExited && starts >= 2:
			return Endpoint{}, fmt.Errorf("%w: container %s exited with code %d right after start", ErrNotReady, name, c.ExitCode)
		case c.State == stateCreated && starts > 0:
			// Still "created" after a start: another caller's start (a
			// replica that won the create) is in flight. Let it finish.
			err = sleep(ctx, 20*time.Millisecond)
		case c.State == stateCreated || c.State == stateExited:
			starts++
			action = "started"
			err = m.start(ctx, id, name)
		case c.State == stateRestarting || c.State == stateRemoving:
			err = sleep(ctx, 50*time.Millisecond)
		default:
			return Endpoint{}, fmt.Errorf("container %s is %s (remove it to recreate)", name, c.State)
		}
		if err != nil && !errors.Is(err, ErrNoContainer) {
			// Someone else may have changed it meanwhile (a start or
			// unpause racing ours); it only matters if it is not running now.
			if c2, ierr := m.eng.Inspect(ctx, name); ierr == nil && c2.State == stateRunning {
				c, err = c2, nil
				continue
			}
			return Endpoint{}, err
		}
		c, err = m.eng.Inspect(ctx, name)
	}
	m.mu.Lock()
	m.observeLocked(m.sandboxLocked(id), c)
	m.mu.Unlock()

	eff := m.effectiveTemplate(tpl, c)
	if c.IP == "" {
		return Endpoint{}, fmt.Errorf("container %s has no address on network %s", name, m.cfg.Network)
	}
	ep := Endpoint{ID: id, Addr: endpointAddr(c, eff.Port), Template: c.Labels[LabelTemplate]}
	m.setPhase(id, PhaseWaitingPort, fmt.Sprintf("waiting for port %d", eff.Port))
	err = waitReady(ctx, ep.Addr, eff.Ready.Path, func(ctx context.Context) error {
		c, err := m.eng.Inspect(ctx, name)
		switch {
		case err != nil:
			return err
		case c.State == stateExited || c.State == stateDead:
			return fmt.Errorf("%w: container %s %s with code %d", ErrNotReady, name, c.State, c.ExitCode)
		}
		return nil
	})
	if err != nil {
		return Endpoint{}, err
	}
	sb := m.sandboxFor(id)
	sb.ep.Store(&ep)
	took := m.now().Sub(t0)
	log.InfoContext(ctx, "sandbox ready", "action", action, "took", took, "addr", ep.Addr)
	if kind := coldStartKind(action); kind != "" && m.cfg.OnColdStart != nil {
		m.cfg.OnColdStart(kind, took)
	}
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

// start starts an existing container within the start limits.
func (m *Manager) start(ctx context.Context, id, name string) error {
	release, err := m.acquireStart(ctx)
	if err != nil {
		return err
	}
	defer release()
	m.setPhase(id, PhaseStarting, "")
	if err := m.eng.Start(ctx, name); err != nil {
		return err
	}
	m.markRunning(id)
	return nil
}

// create creates and starts id's container from tpl within the start
// limits. errNameTaken if the name is already in use.
func (m *Manager) create(ctx context.Context, id string, tpl *config.Template) error {
	spec, err := m.spec(id, tpl)
	if err != nil {
		return err
	}
	release, err := m.acquireStart(ctx)
	if err != nil {
		return err
	}
	defer release()
	if err := m.ensureNetwork(ctx); err != nil {
		return err
	}
	m.setPhase(id, PhaseCreating, "")
	err = m.eng.Create(ctx, spec)
	if errors.Is(err, errNoNetwork) { // removed behind our back: make it again
		m.mu.Lock()
		m.netReady = false
		m.mu.Unlock()
		if err := m.ensureNetwork(ctx); err != nil {
			return err
		}
		err = m.eng.Create(ctx, spec)
	}
	if err != nil {
		return err
	}
	m.setPhase(id, PhaseStarting, "")
	if err := m.eng.Start(ctx, spec.Name); err != nil {
		return err
	}
	m.markRunning(id)
	return nil
}

// spec resolves tpl into the container to create for id.
func (m *Manager) spec(id string, tpl *config.Template) (ctrSpec, error) {
	if tpl.Image == "" {
		return ctrSpec{}, fmt.Errorf("template %q has no image", tpl.Name)
	}
	port := tpl.Port
	if port <= 0 {
		port = 3000
	}
	labels := maps.Clone(m.cfg.Labels)
	if labels == nil {
		labels = make(map[string]string, 4)
	}
	labels[LabelManaged] = "true"
	labels[LabelSandbox] = id
	labels[LabelTemplate] = tpl.Name
	labels[LabelPort] = strconv.Itoa(port)
	env := make([]string, 0, len(tpl.Env))
	for k, v := range tpl.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return ctrSpec{
		Name:     ContainerName(id),
		Image:    tpl.Image,
		Cmd:      tpl.Cmd,
		Env:      env,
		Labels:   labels,
		Network:  m.cfg.Network,
		Memory:   int64(tpl.Memory),
		CPUs:     tpl.CPUs,
		Pids:     tpl.Pids,
		CapAdd:   tpl.CapAdd,
		ReadOnly: tpl.ReadOnly,
	}, nil
}

// acquireStart takes a running-capacity reservation and a start slot.
// The returned func gives both back; by then a started sandbox is counted
// as running through its state.
func (m *Manager) acquireStart(ctx context.Context) (release func(), err error) {
	if !m.reserve() {
		// The count may be stale (containers stopped behind our back):
		// ask Docker once before refusing.
		if err := m.refreshStates(ctx); err != nil {
			return nil, err
		}
		if !m.reserve() {
			return nil, fmt.Errorf("%w: %d sandboxes running or starting", ErrCapacity, m.maxRunning.Load())
		}
	}
	unreserve := func() {
		m.mu.Lock()
		m.reserved--
		m.mu.Unlock()
	}
	select {
	case m.queued <- struct{}{}:
	default:
		unreserve()
		return nil, fmt.Errorf("%w: %d starts queued", ErrCapacity, cap(m.queued))
	}
	// Time in the queue is capacity's, not the app's: it does not count
	// against the wake's ready timeout.
	if clock, _ := ctx.Value(readyClockKey{}).(*readyClock); clock != nil {
		clock.pause()
		defer clock.resume()
	}
	t := time.NewTimer(m.cfg.StartQueueTimeout)
	defer t.Stop()
	select {
	case m.slots <- struct{}{}:
		<-m.queued
	case <-t.C:
		<-m.queued
		unreserve()
		return nil, fmt.Errorf("%w: no start slot within %s", ErrCapacity, m.cfg.StartQueueTimeout)
	case <-ctx.Done():
		<-m.queued
		unreserve()
		return nil, fmt.Errorf("wait for a start slot: %w", context.Cause(ctx))
	}
	n := m.startsInFlight.Add(1)
	for {
		peak := m.peakStarts.Load()
		if n <= peak || m.peakStarts.CompareAndSwap(peak, n) {
			break
		}
	}
	return func() {
		m.startsInFlight.Add(-1)
		<-m.slots
		unreserve()
	}, nil
}

// reserve counts a start against MaxRunning if there is room.
func (m *Manager) reserve() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if int64(m.runningLocked()+m.reserved) >= m.maxRunning.Load() {
		return false
	}
	m.reserved++
	return true
}

// refreshStates re-reads every managed container's state from Docker.
func (m *Manager) refreshStates(ctx context.Context) error {
	list, err := m.eng.List(ctx, m.scopeLabels())
	if err != nil {
		return err
	}
	states := make(map[string]string, len(list))
	for _, c := range list {
		if id, ok := idFromName(c.Name, c.Labels[LabelPool]); ok {
			states[id] = c.State
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, sb := range m.sandboxes {
		sb.state = states[id]
		if sb.state != stateRunning {
			sb.ep.Store(nil)
		}
	}
	return nil
}

// runningLocked counts sandboxes holding resources. m.mu must be held.
func (m *Manager) runningLocked() int {
	n := 0
	for _, sb := range m.sandboxes {
		if sb.state == stateRunning || sb.state == statePaused {
			n++
		}
	}
	return n
}

func (m *Manager) markRunning(id string) {
	m.mu.Lock()
	m.sandboxLocked(id).state = stateRunning
	m.mu.Unlock()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
