package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
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
// existing sandbox: then a missing container is runtime.ErrNotFound.
//
// Errors wrap ErrInvalidID, runtime.ErrNotFound, runtime.ErrUnavailable, ErrCapacity,
// ErrNotReady, runtime.ErrNoImage, runtime.ErrForeign (the name is on a container
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
	// container created for it carries runtime.LabelSubject (SubjectKey).
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
	// pool); Ensure fails with runtime.ErrNotFound. The gateway sets it for
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
	// Created, if set, is called once this wake's own create (or pool
	// claim) made the container it goes on to start: tpl, its env and
	// Metadata are the sandbox's. Not for a container that existed, nor
	// one another caller (maybe another replica) made first. In a shared
	// wake only the caller that started it is told: the others' options
	// were not applied, which is how the admin API tells a backend (#23).
	Created func()
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
	c, err := m.findID(ctx, id)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return fmt.Errorf("sandbox %s: %w (no container)", id, ErrAsleep)
	case err != nil:
		return fmt.Errorf("sandbox %s: %w", id, err)
	case c.State == runtime.StateRunning:
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
		return Endpoint{}, fmt.Errorf("sandbox %s: manager closed: %w", id, runtime.ErrUnavailable)
	}
	m.loops.wg.Add(1)
	sb := m.sandboxLocked(id) // the record this wake passes down
	// Under m.mu, as Remove counts: a Remove either sees this wake in
	// flight and stops it, or came before it and does not.
	sb.waking.Add(1)
	removals := sb.removals.Load()
	m.mu.Unlock()
	defer m.loops.wg.Done()
	defer sb.waking.Add(-1)
	sb.op.Lock() // a reaper stop in progress finishes first
	defer sb.op.Unlock()

	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	defer context.AfterFunc(m.loops.ctx, func() { cancel(context.Canceled) })()
	clock := startReadyClock(readyTimeout(tpl), func() { cancel(errReadyTimeout) })
	defer clock.stop()
	ctx = context.WithValue(ctx, readyClockKey{}, clock)

	m.beginDiag(sb, tpl)
	m.setPhase(sb, PhaseQueued, "")
	ep, err := m.wake(ctx, sb, tpl, opts, removals)
	if err == nil {
		m.setPhase(sb, PhaseReady, "")
		return ep, nil
	}
	defer func() { m.setFailed(sb, err) }()
	switch {
	case m.loops.ctx.Err() != nil:
		err = fmt.Errorf("manager closed: %w: %w", runtime.ErrUnavailable, err)
	case context.Cause(ctx) == errReadyTimeout &&
		!errors.Is(err, ErrNotReady) && !errors.Is(err, ErrCapacity) && !errors.Is(err, runtime.ErrUnavailable):
		err = fmt.Errorf("%w: %w: %w", ErrNotReady, errReadyTimeout, err)
	}
	if m.loops.ctx.Err() == nil {
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
func (m *Manager) wake(ctx context.Context, sb *sandbox, tpl *config.Template, opts Options, removals int64) (Endpoint, error) {
	log := m.log.With("sandbox", sb.id)
	t0 := m.now()
	r := runner{m: m, sb: sb, id: sb.id, name: m.name(sb.id), tpl: tpl, onCreate: opts.OnCreate, noCreate: opts.NoCreate,
		subject: opts.Subject, subjectMax: opts.SubjectMaxRunning,
		mayServe: opts.MayServe, meta: opts.Metadata, log: log, action: "found running", removals: removals}
	c, err := r.run(ctx)
	if err == nil && opts.Created != nil && (r.action == "created" || r.claimed) {
		opts.Created()
	}
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
