package sandboxmgr

import (
	"context"
	"sync"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/records"
)

// Handle is one sandbox as a request sees it: one read of what the manager
// knows (Snapshot), and what a request does to it. Manager.Sandbox returns
// it without a runtime call; the record implements it, so a known
// sandbox's handle costs no allocation. After a Remove, Touch, Hold and
// Wake go to the id's record of the moment.
//
// Identity is confirmed, not assumed (DESIGN.md): a new upstream
// connection carries a request only after Confirm, asked once it was made,
// said the address is still the instance's (confirm.go).
type Handle interface {
	// Snapshot reads, with no runtime call, what the manager knows.
	Snapshot() Snapshot
	// Ensure is Manager.EnsureWith for this sandbox; the endpoint it
	// returns counts as activity (as Touch).
	Ensure(ctx context.Context, tpl *config.Template, opts Options) (Endpoint, error)
	// Wake starts Ensure without waiting (Snapshot's Progress follows
	// it). The manager owns the wake; Close cancels and waits for it.
	Wake(tpl *config.Template, opts Options)
	// Touch records activity.
	Touch()
	// Hold marks a long-lived connection until release (idempotent) is
	// called; opening and closing both count as activity.
	Hold() (release func())
	// Forget drops the cached endpoint if it is still at addr (a dial
	// failed) and reports its instance gone.
	Forget(addr string)
	// Confirm asks the runtime, now, whether addr (any port of it) still
	// belongs to instance, a run of this sandbox (Endpoint.Instance):
	// running, the same run, on that address. Called once a new
	// connection to addr was made, before it carries anything. nil: it
	// does. An error wrapping ErrMoved: it does not, and a cached endpoint
	// of that instance is dropped (the next Ensure asks the runtime).
	// Any other error (runtime.ErrUnavailable, ctx's end): the runtime
	// could not tell, and the connection must not be used either. It
	// makes one runtime call, never answered from a cache (a read begun
	// before the connection was made would confirm nothing about it),
	// bounded by 5 s and by ctx.
	Confirm(ctx context.Context, instance, addr string) error
}

// Snapshot is what the manager knows of one sandbox at one moment.
type Snapshot struct {
	// Exists: the manager knows an instance of it; Template is the one
	// that instance was made from, by its own labels. A token's template
	// only picks one for a sandbox not made yet.
	Exists   bool
	Template string
	// Settings are its settings and share links as this replica holds
	// them; Fresh: recent enough to grant access on (package records).
	Settings records.Settings
	Fresh    bool
	// Endpoint is its cached ready endpoint, if Ready.
	Endpoint Endpoint
	Ready    bool
	// Progress is where its wake stands (PhaseReady when Ready).
	Progress Progress
}

// Sandbox returns sandbox id's handle, without a runtime call; nothing is
// kept for an unknown id until the handle wakes or touches it.
func (m *Manager) Sandbox(id string) Handle {
	if sb := m.lookup(id); sb != nil {
		return sb
	}
	return absent{m: m, id: id}
}

func (sb *sandbox) Snapshot() Snapshot {
	m := sb.m
	var s Snapshot
	m.mu.RLock()
	s.Exists, s.Template = sb.container != "", sb.template
	m.mu.RUnlock()
	s.Settings, s.Fresh = m.recs.Settings(sb.id)
	if ep := sb.ep.Load(); ep != nil {
		s.Endpoint, s.Ready = *ep, true
	}
	s.Progress = m.progress(sb)
	return s
}

func (sb *sandbox) Ensure(ctx context.Context, tpl *config.Template, opts Options) (Endpoint, error) {
	ep, err := sb.m.EnsureWith(ctx, sb.id, tpl, opts)
	if err == nil {
		sb.live().Touch()
	}
	return ep, err
}

func (sb *sandbox) Wake(tpl *config.Template, opts Options) { sb.m.wakeAsync(sb.id, tpl, opts) }

func (sb *sandbox) Touch() {
	sb = sb.live()
	sb.lastActivity.Store(sb.m.now().UnixNano())
}

func (sb *sandbox) Hold() (release func()) {
	sb = sb.live()
	sb.holds.Add(1)
	sb.lastActivity.Store(sb.m.now().UnixNano())
	var once sync.Once
	return func() {
		once.Do(func() {
			sb.holds.Add(-1)
			sb.lastActivity.Store(sb.m.now().UnixNano())
		})
	}
}

func (sb *sandbox) Forget(addr string) {
	m := sb.m
	var gone string
	m.mu.Lock()
	if sb.last != nil && sb.last.Addr == addr {
		gone = m.dropLocked(sb)
	}
	m.mu.Unlock()
	m.gone(gone)
}

func (sb *sandbox) Confirm(ctx context.Context, instance, addr string) error {
	return sb.m.confirm(ctx, sb.id, instance, addr)
}

// live is sb, or its id's record now if sb was dropped (a Remove).
func (sb *sandbox) live() *sandbox {
	if !sb.dropped.Load() {
		return sb
	}
	return sb.m.sandboxFor(sb.id)
}

// absent is the handle of a sandbox without a record: it makes one only
// when asked to act.
type absent struct {
	m  *Manager
	id string
}

func (a absent) Snapshot() Snapshot {
	if sb := a.m.lookup(a.id); sb != nil {
		return sb.Snapshot()
	}
	var s Snapshot
	s.Settings, s.Fresh = a.m.recs.Settings(a.id)
	return s
}

func (a absent) Ensure(ctx context.Context, tpl *config.Template, opts Options) (Endpoint, error) {
	ep, err := a.m.EnsureWith(ctx, a.id, tpl, opts)
	if err == nil {
		a.m.sandboxFor(a.id).Touch()
	}
	return ep, err
}

func (a absent) Wake(tpl *config.Template, opts Options) { a.m.wakeAsync(a.id, tpl, opts) }
func (a absent) Touch()                                  { a.m.sandboxFor(a.id).Touch() }
func (a absent) Hold() func()                            { return a.m.sandboxFor(a.id).Hold() }

func (a absent) Confirm(ctx context.Context, instance, addr string) error {
	return a.m.confirm(ctx, a.id, instance, addr)
}

func (a absent) Forget(addr string) {
	if sb := a.m.lookup(a.id); sb != nil {
		sb.Forget(addr)
	}
}
