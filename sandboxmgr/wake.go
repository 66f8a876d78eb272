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

// Ensure returns the endpoint of sandbox id, waking or creating it from tpl
// as needed, once it is ready. A cached ready endpoint costs no runtime
// call. Otherwise concurrent callers share one wake, detached from ctx and
// bounded by tpl's ready timeout; each waits as long as its ctx allows. tpl
// nil: a missing container is runtime.ErrNotFound.
//
// Errors wrap ErrInvalidID, runtime.ErrNotFound, runtime.ErrUnavailable,
// ErrCapacity, ErrNotReady, runtime.ErrNoImage, runtime.ErrForeign (the
// name is on a container this manager does not own; left alone), or ctx's.
func (m *Manager) Ensure(ctx context.Context, id string, tpl *config.Template) (Endpoint, error) {
	return m.EnsureWith(ctx, id, tpl, Options{})
}

// Options adjust one EnsureWith call.
type Options struct {
	// NoWake: if the sandbox is stopped, paused or absent and no wake is in
	// progress, fail with ErrAsleep. A wake in progress is waited for, and a
	// running but uncached sandbox is probed. For background fetches and HMR
	// reconnect loops, so a tab left open keeps nothing awake (#7).
	NoWake bool
	// Subject is who the wake is for (a token's sub); a container created
	// for it carries runtime.LabelSubject.
	Subject string
	// SubjectMaxRunning, with Subject: a wake that would make one more of
	// the subject's sandboxes run while that many others run (listed by the
	// runtime) or are being woken by this manager fails with
	// *SubjectLimitError. Exact on one manager; replicas see each other's
	// only once running, so each may admit up to the cap at the same time.
	// Such a wake never claims from the pool (a claimed container's labels
	// cannot change, so it could not be counted).
	SubjectMaxRunning int
	// OnCreate, if set, is called right before a container is created (not
	// started or unpaused); its error fails the wake (wrapped). The gateway
	// charges create quotas here. In a shared wake only its starter counts.
	OnCreate func() error
	// NoCreate: a missing sandbox is not created nor claimed
	// (runtime.ErrNotFound): public means "reachable without a token", never
	// "anyone may create" (#21).
	NoCreate bool
	// MayServe, if set, is asked with the sandbox's own template before a
	// cached endpoint is handed out, an existing container is woken, and on
	// a shared wake's endpoint; its error fails Ensure (wrapped).
	MayServe func(template string) error
	// Metadata labels a sandbox this wake creates (CheckMetadata must accept
	// it); an existing one keeps its own. Such a wake never claims from the
	// pool.
	Metadata map[string]string
	// Created, if set, is called once this wake's own create or claim made
	// the container (tpl, env and Metadata are the sandbox's); not for one
	// that existed or another caller made. In a shared wake only its starter
	// is told (#23).
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
// or its container runs (a probe, not a wake); ErrAsleep otherwise.
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

// wakeDetached runs one wake for id: detached from the first caller, bounded
// by the ready timeout, canceled by Close, which waits for it.
func (m *Manager) wakeDetached(ctx context.Context, id string, tpl *config.Template, opts Options) (Endpoint, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Endpoint{}, fmt.Errorf("sandbox %s: manager closed: %w", id, runtime.ErrUnavailable)
	}
	m.loops.wg.Add(1)
	sb := m.sandboxLocked(id) // the record this wake passes down
	// Under m.mu, as Remove counts: Remove sees this wake or came before.
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
	defer func() {
		sb.progress.Store(&Progress{Phase: PhaseFailed, Msg: "the sandbox could not be started", Err: err})
		m.mark(sb, PhaseFailed)
	}()
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

// readyClock is a wake's deadline that stops while it waits in the start
// queue (acquireStart pauses and resumes it).
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
	// Admitted against the subject's cap until the wake ends: by then its
	// instance runs (and is listed) or never will.
	defer func() {
		if r.admitted != nil {
			r.admitted()
		}
	}()
	c, err := r.run(ctx)
	if err == nil && opts.Created != nil && (r.action == "created" || r.claimed) {
		opts.Created()
	}
	if r.claimed {
		// Refill after this wake: a refill would compete with the probe.
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
