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

// Why a wake failed, as StartError.Reason (#16), shown with the
// container's last output.
const (
	ReasonExited       = "exited"        // the app exited while starting
	ReasonCrashLoop    = "crash_loop"    // it exited right after each of two starts
	ReasonReadyTimeout = "ready_timeout" // it ran but never answered within the ready timeout
	ReasonImageMissing = "image_missing" // the template's image is not on the engine
)

// Errors the wake wraps so the failure can be named without matching text.
var (
	errExited    = errors.New("app exited")
	errCrashLoop = errors.New("app exits right after start")
)

// StartError is a failed wake explained; it wraps the wake's error.
type StartError struct {
	Reason   string // one of the Reason constants
	ExitCode int    // when Reason is ReasonExited or ReasonCrashLoop
	// OOMKilled: killed for exceeding the memory limit (ExitCode 137).
	OOMKilled bool
	Logs      []string // at most LogTailLines lines of LogLineMax runes
	Err       error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("%s: %v", e.Reason, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// Code is the failure's name in preview and admin API answers alike:
// "sandbox_exited" (exited, crash loop), "not_ready" (never answered, the
// one 504) or "sandbox_failed" (502s).
func (e *StartError) Code() string {
	switch e.Reason {
	case ReasonExited, ReasonCrashLoop:
		return "sandbox_exited"
	case ReasonReadyTimeout:
		return "not_ready"
	default:
		return "sandbox_failed"
	}
}

// Failure is a failed start as the sandbox list shows it.
type Failure struct {
	Reason   string
	ExitCode *int
	At       time.Time
}

// recordFailure keeps se as id's last failure for List.
func (m *Manager) recordFailure(id string, se *StartError) {
	sb := m.lookup(id)
	if sb == nil {
		return
	}
	f := &Failure{Reason: se.Reason, At: m.now()}
	if se.Reason == ReasonExited || se.Reason == ReasonCrashLoop {
		code := se.ExitCode
		f.ExitCode = &code
	}
	sb.diag.failed.Store(f)
}

// failBudget bounds explaining a failure (lookup, kill, log read).
const failBudget = 5 * time.Second

// explainFailure turns a failed wake's err into a *StartError when it is
// the app's or the template's fault, killing an app that never became
// ready (it would hold memory behind a 504). Other errors come back
// unchanged. timedOut: the ready timeout fired.
func (m *Manager) explainFailure(id string, err error, timedOut bool) (out error) {
	se := &StartError{Err: err}
	defer func() {
		if out == error(se) {
			m.recordFailure(id, se)
		}
	}()
	switch {
	case errors.Is(err, runtime.ErrNoImage):
		se.Reason = ReasonImageMissing
		return se // no container was made
	case errors.Is(err, errCrashLoop):
		se.Reason = ReasonCrashLoop
	case errors.Is(err, errExited):
		se.Reason = ReasonExited
	case timedOut || errors.Is(err, errReadyTimeout):
		se.Reason = ReasonReadyTimeout
	default:
		return err
	}
	ctx, cancel := context.WithTimeout(m.loops.ctx, failBudget)
	defer cancel()
	log := m.log.With("sandbox", id)
	c, ierr := m.findID(ctx, id)
	if ierr != nil {
		log.WarnContext(ctx, "inspect failed container", "err", ierr)
		return se
	}
	if c.State == runtime.StateRunning || c.State == runtime.StatePaused || c.State == runtime.StateRestarting {
		m.beforeStop(id)
		if kerr := m.rt.Sleep(ctx, c.ID, runtime.SleepKill); kerr != nil && !errors.Is(kerr, runtime.ErrNotFound) {
			log.WarnContext(ctx, "stop container after failed start", "err", kerr)
		} else {
			m.setState(id, runtime.StateExited)
			log.InfoContext(ctx, "stopped container after failed start", "reason", se.Reason)
		}
	} else {
		se.ExitCode, se.OOMKilled = c.ExitCode, c.OOMKilled
	}
	if le := m.caps.Logs; le != nil {
		lw := newLogLines(LogTailLines, nil)
		if lerr := le.Logs(ctx, c.ID, LogTailLines, false, lw); lerr != nil {
			log.WarnContext(ctx, "read logs of failed container", "err", lerr)
		}
		lw.Flush()
		se.Logs = lw.Lines()
	}
	return se
}

// wakeTimes remembers typical wake durations per template, for the
// waiting page (#16); in memory only.
type wakeTimes struct {
	mu sync.Mutex               // guards ewma
	ew map[string]time.Duration // template → moving average
}

// record folds took into template's average (weight 1/4 for the newest).
func (w *wakeTimes) record(template string, took time.Duration) {
	if template == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ew == nil {
		w.ew = make(map[string]time.Duration)
	}
	if old, ok := w.ew[template]; ok {
		took = (3*old + took) / 4
	} else if len(w.ew) >= 1024 { // templates come from config; bound it anyway
		return
	}
	w.ew[template] = took
}

func (w *wakeTimes) typical(template string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ew[template]
}

// withDiag adds the waiting page's output, elapsed and typical times.
func (m *Manager) withDiag(sb *sandbox, p Progress) Progress {
	p.Marks = sb.marksNow()
	if l := sb.diag.logs.Load(); l != nil {
		p.Logs = *l
	}
	if t0 := sb.diag.wakeStart.Load(); t0 != 0 && p.Phase != PhaseFailed {
		p.Elapsed = m.now().Sub(time.Unix(0, t0))
	}
	if tpl := sb.diag.template.Load(); tpl != nil {
		p.Typical = m.wakeTimes.typical(*tpl)
	}
	var se *StartError
	if errors.As(p.Err, &se) && len(se.Logs) > 0 {
		p.Logs = se.Logs
	}
	return p
}

// beginDiag resets id's diagnostics as a wake from tpl (may be nil) begins.
func (m *Manager) beginDiag(sb *sandbox, tpl *config.Template) {
	sb.diag.logs.Store(nil)
	sb.diag.wakeStart.Store(m.now().UnixNano())
	if tpl != nil {
		sb.diag.template.Store(&tpl.Name)
	}
}
