package sandboxmgr

import (
	"slices"
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
	// Logs is the container's last output (sanitized, LogTailLines at
	// most): live while it starts, the final lines when it failed.
	Logs    []string
	Elapsed time.Duration // since the wake began; zero when failed or unknown
	Typical time.Duration // how long wakes of its template took lately; zero: unknown
	// Marks are when each phase of the current or last wake began, ending
	// with PhaseReady or PhaseFailed (Server-Timing #22, metrics).
	Marks []PhaseMark
}

// PhaseMark is when a wake entered a phase.
type PhaseMark struct {
	Phase string
	At    time.Time
}

// setPhase records sb's wake entering phase (the wake's goroutine only).
func (m *Manager) setPhase(sb *sandbox, phase, msg string) {
	sb.progress.Store(&Progress{Phase: phase, Msg: msg})
	m.mark(sb, phase)
}

// mark appends phase to sb's marks; a wake's first phase starts them anew.
func (m *Manager) mark(sb *sandbox, phase string) {
	var marks []PhaseMark
	if old := sb.marks.Load(); old != nil && phase != PhaseQueued {
		marks = slices.Clone(*old)
	}
	marks = append(marks, PhaseMark{phase, m.now()})
	sb.marks.Store(&marks)
	if phase == PhaseReady || phase == PhaseFailed {
		m.wakePhases(sb, marks)
	}
}

// wakePhases tells the Observer how long each phase of an ended wake took.
func (m *Manager) wakePhases(sb *sandbox, marks []PhaseMark) {
	if m.cfg.Observer == nil {
		return
	}
	tpl := ""
	if t := sb.diag.template.Load(); t != nil {
		tpl = *t
	}
	for i := 0; i+1 < len(marks); i++ {
		m.cfg.Observer.WakePhase(tpl, TimingName(marks[i].Phase), marks[i+1].At.Sub(marks[i].At))
	}
}

// TimingName is a phase's short name in Server-Timing and the metrics.
func TimingName(phase string) string {
	switch phase {
	case PhaseCreating:
		return "create"
	case PhaseStarting:
		return "start"
	case PhaseWaitingPort, PhaseReady:
		return "app" // ready: the moment between the probe and Ensure's return
	case PhaseFailed:
		return "failed"
	}
	return "queued"
}

// PhaseSpan is the part of a request's wait spent in one phase.
type PhaseSpan struct {
	Name string // TimingName's: queued, create, start, app
	D    time.Duration
}

// Spans splits [from, to] by a wake's marks, one span per TimingName,
// adding up to to-from; time before the first mark counts as queued.
func Spans(marks []PhaseMark, from, to time.Time) []PhaseSpan {
	if len(marks) == 0 || marks[0].At.After(from) {
		marks = append([]PhaseMark{{Phase: PhaseQueued, At: from}}, marks...)
	}
	var out []PhaseSpan
	for i, m := range marks {
		s, e := m.At, to
		if i+1 < len(marks) {
			e = marks[i+1].At
		}
		if s.Before(from) {
			s = from
		}
		if e.After(to) {
			e = to
		}
		if !e.After(s) {
			continue
		}
		name := TimingName(m.Phase)
		if n := len(out); n > 0 && out[n-1].Name == name {
			out[n-1].D += e.Sub(s)
		} else {
			out = append(out, PhaseSpan{name, e.Sub(s)})
		}
	}
	return out
}

// progress is sb's wake: PhaseReady if its endpoint is cached, else the
// current or last wake's phase.
func (m *Manager) progress(sb *sandbox) Progress {
	if sb.ep.Load() != nil {
		return Progress{Phase: PhaseReady, Marks: sb.marksNow()}
	}
	if p := sb.progress.Load(); p != nil {
		if p.Phase == PhaseReady { // ready once, dropped since (stopped, killed)
			return Progress{}
		}
		return m.withDiag(sb, *p)
	}
	return Progress{}
}

// wakeAsync starts a wake like EnsureWith without waiting; the caller
// follows its Progress. Close cancels and waits for it.
func (m *Manager) wakeAsync(id string, tpl *config.Template, opts Options) {
	if !config.ValidID(id) {
		return
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return
	}
	// Added under the read lock: Close sets closed under the write
	// lock before it waits.
	m.loops.bg.Go(func() {
		// The wake itself is detached and shared; this only waits for it.
		_, _ = m.EnsureWith(m.loops.ctx, id, tpl, opts)
	})
	if sb := m.sandboxes[id]; sb != nil && sb.ep.Load() == nil && sb.waking.Load() == 0 {
		// Show "queued" at once, before the goroutine reaches the wake.
		sb.progress.Store(&Progress{Phase: PhaseQueued})
	}
}

// marksNow is sb's phase marks (nil before any wake).
func (sb *sandbox) marksNow() []PhaseMark {
	if p := sb.marks.Load(); p != nil {
		return *p
	}
	return nil
}
