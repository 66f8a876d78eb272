package sandboxmgr

import (
	"time"

	"github.com/previewgate/previewgate/config"
)

// Wake phases, in order, as shown on the gateway's waiting page.
const (
	PhaseQueued      = "queued"           // waiting for a start slot
	PhaseCreating    = "creating"         // creating the container
	PhaseStarting    = "starting"         // starting or unpausing it
	PhaseWaitingPort = "waiting for port" // probing the app
	PhaseReady       = "ready"
	PhaseFailed      = "failed"
)

// Progress is where a sandbox's wake stands.
type Progress struct {
	Phase string // one of the Phase constants; "" if no wake is known
	Msg   string // detail for people, e.g. "waiting for port 3000"
	Err   error  // PhaseFailed only: the wake's error, as Ensure returns it
	// Logs is the container's last output (sanitized, at most
	// LogTailLines lines): live while it starts, the final lines when it
	// failed.
	Logs    []string
	Elapsed time.Duration // since the wake began; zero when failed or unknown
	Typical time.Duration // how long wakes of its template took lately; zero: unknown
}

func (m *Manager) setPhase(sb *sandbox, phase, msg string) {
	sb.progress.Store(&Progress{Phase: phase, Msg: msg})
}

func (m *Manager) setFailed(sb *sandbox, err error) {
	sb.progress.Store(&Progress{Phase: PhaseFailed, Msg: "the sandbox could not be started", Err: err})
}

// Progress reports id's wake: PhaseReady if its endpoint is cached, else the
// phase of the current (or last) wake.
func (m *Manager) Progress(id string) Progress {
	sb := m.lookup(id)
	if sb == nil {
		return Progress{}
	}
	if sb.ep.Load() != nil {
		return Progress{Phase: PhaseReady}
	}
	if p := sb.progress.Load(); p != nil {
		if p.Phase == PhaseReady { // ready once, dropped since (stopped, killed)
			return Progress{}
		}
		return m.withDiag(sb, *p)
	}
	return Progress{}
}

// Wake starts waking (or creating) id like EnsureWith, without waiting: the
// caller follows it with Progress. The wake is owned by the manager; Close
// cancels and waits for it.
func (m *Manager) Wake(id string, tpl *config.Template, opts Options) {
	if !config.ValidID(id) {
		return
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return
	}
	// Added under the read lock: Close sets closed under the write lock
	// before it waits, so this Add happens before that Wait.
	m.bg.Go(func() {
		// The wake itself is detached and shared; this only waits for it.
		_, _ = m.EnsureWith(m.ctx, id, tpl, opts)
	})
	if sb := m.sandboxes[id]; sb != nil && sb.ep.Load() == nil && sb.waking.Load() == 0 {
		// Show "queued" at once, before the goroutine reaches the wake.
		sb.progress.Store(&Progress{Phase: PhaseQueued})
	}
}
