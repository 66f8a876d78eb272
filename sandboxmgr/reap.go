package sandboxmgr

import (
	"context"
	"errors"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The idle reaper (#7), per sandbox, from the activity the gateway reports
// (Touch, Hold) and its template:
//   - running, no open socket, no request for idle_timeout: stop (or pause,
//     per idle_action);
//   - open sockets but no request for max_socket_idle: stop anyway (a tab
//     left open overnight), after Listener.BeforeStop closes them with 1001;
//   - stopped (or paused) for remove_after: remove.
//
// Activity lives in memory: after a restart a sandbox counts as active from
// the restart (or its start, if later), so a restart never reaps what it
// cannot judge; a kept workspace whose stop the runtime recorded counts
// from that stop. A stop is serialized with wakes (sandbox.op).

// every calls fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// reapAction is what the reaper decided for one sandbox.
type reapAction int

const (
	reapNothing reapAction = iota
	reapIdle               // stop or pause per idle_action
	reapSockets            // stop despite open sockets
	reapRemove
)

func (m *Manager) reapOnce(ctx context.Context) {
	m.mu.RLock()
	list := make([]*sandbox, 0, len(m.sandboxes))
	for _, sb := range m.sandboxes {
		list = append(list, sb)
	}
	m.mu.RUnlock()
	for _, sb := range list {
		if ctx.Err() != nil {
			return
		}
		if sb.waking.Load() > 0 || !sb.op.TryLock() {
			continue // being woken: it is wanted
		}
		m.reapOne(ctx, sb)
		sb.op.Unlock()
	}
}

// decideLocked returns what to do with sb now: its plan's action once
// due. m.mu must be held (for reading).
func (m *Manager) decideLocked(sb *sandbox, tpl *config.Template, now time.Time) reapAction {
	if p := m.planLocked(sb, tpl); p.act != reapNothing && !now.Before(p.at) {
		return p.act
	}
	return reapNothing
}

// reapPlan is what the reaper will do with a sandbox, and from when. The
// reaper acts on it and the admin API explains it (why.go): one set of rules.
type reapPlan struct {
	act   reapAction
	at    time.Time     // due from then (the reaper's next round after it)
	from  time.Time     // the moment idleness (or the stop) counts from
	limit time.Duration // the template's setting that applies
}

// planLocked returns sb's plan under tpl (with withReapDefaults applied).
// m.mu must be held (for reading).
func (m *Manager) planLocked(sb *sandbox, tpl *config.Template) reapPlan {
	last := latest(sb.lastActive(), sb.startedAt, m.born)
	switch sb.state {
	case runtime.StateRunning:
		p := reapPlan{act: reapIdle, at: last.Add(tpl.IdleTimeout.D()), from: last, limit: tpl.IdleTimeout.D()}
		if sb.holds.Load() != 0 {
			p = reapPlan{act: reapSockets, at: last.Add(tpl.MaxSocketIdle.D()), from: last, limit: tpl.MaxSocketIdle.D()}
		}
		// A keep-up (package records) puts the stop off until it ends.
		if keep := m.keepUpUntil(sb.id); keep.After(p.at) {
			p.at = keep
		}
		return p
	case runtime.StateExited, runtime.StatePaused:
		since := latest(last, sb.stoppedAt)
		if !sb.stopRecorded.IsZero() {
			// The runtime recorded its stop (a kept workspace).
			since = latest(sb.lastActive(), sb.stopRecorded, sb.stoppedAt)
		}
		return reapPlan{act: reapRemove, at: since.Add(tpl.RemoveAfter.D()), from: since, limit: tpl.RemoveAfter.D()}
	}
	return reapPlan{act: reapNothing}
}

// reapOne acts on one sandbox. sb.op must be held.
func (m *Manager) reapOne(ctx context.Context, sb *sandbox) {
	m.mu.RLock()
	tplName := sb.template
	m.mu.RUnlock()
	tpl := m.cfg.Templates(tplName)
	if tpl == nil {
		return // a template no longer configured: leave its sandboxes alone
	}
	tpl = withReapDefaults(tpl)
	m.mu.RLock()
	p := m.planLocked(sb, tpl)
	m.mu.RUnlock()
	act := p.act
	if act == reapNothing || m.now().Before(p.at) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Idle here; maybe not on another replica (shared.go).
	if act != reapRemove && !m.sharedIdle(ctx, sb, p.limit) {

		return
	}
	log := m.log.With("sandbox", sb.id)
	var err error
	switch act {
	case reapIdle, reapSockets:
		// New requests wait for sb.op. The instance is reported gone only
		// once stopped: a request arriving now keeps it up.
		m.mu.Lock()
		sb.ep.Store(nil)
		again := m.decideLocked(sb, tpl, m.now())
		m.mu.Unlock()
		if again != act {
			return // a request came in meanwhile; it re-probes at worst
		}
		// By the ID of the owned instance under the name (scope.go).
		var c runtime.Instance
		if c, err = m.ownedByID(ctx, sb.id); err != nil {
			break
		}
		if act == reapSockets {
			m.beforeStop(sb.id)
		}
		if act == reapIdle && tpl.IdleAction == config.IdlePause {
			err = m.rt.Sleep(ctx, c.ID, runtime.SleepPause)
			if err == nil {
				m.setStopped(sb, runtime.StatePaused)
			}
		} else {
			err = m.rt.Sleep(ctx, c.ID, runtime.SleepStop)
			if err == nil {
				m.setStopped(sb, runtime.StateExited)
			}
		}
	case reapRemove:
		err = m.remove(ctx, sb.id, false) // a request waiting on sb.op creates it anew
	}
	if errors.Is(err, runtime.ErrNotFound) {
		m.setStopped(sb, "")
		return
	}
	if err != nil {
		// The cached endpoint is gone; the next request asks the runtime.

		log.WarnContext(ctx, "idle reaper failed", "action", act.String(), "err", err)
		return
	}
	log.InfoContext(ctx, "idle sandbox reaped", "action", act.String())
}

// setStopped records that the reaper stopped or paused sb (or found its
// container gone: state "") and reports its instance gone.
func (m *Manager) setStopped(sb *sandbox, state string) {
	m.mu.Lock()
	sb.state = state
	sb.stoppedAt = m.now()
	gone := m.dropLocked(sb)
	if state == "" {
		sb.last = nil
	}
	m.mu.Unlock()
	m.gone(gone)
}

func (a reapAction) String() string {
	switch a {
	case reapIdle:
		return "idle"
	case reapSockets:
		return "socket idle"
	case reapRemove:
		return "remove"
	}
	return "none"
}

// withReapDefaults fills zero durations (a template not passed through
// config.ApplyDefaults) with the documented defaults.
func withReapDefaults(tpl *config.Template) *config.Template {
	if tpl.IdleTimeout > 0 && tpl.MaxSocketIdle > 0 && tpl.RemoveAfter > 0 {
		return tpl
	}
	t := *tpl
	if t.IdleTimeout <= 0 {
		t.IdleTimeout = config.Duration(15 * time.Minute)
	}
	if t.MaxSocketIdle <= 0 {
		t.MaxSocketIdle = config.Duration(time.Hour)
	}
	if t.RemoveAfter <= 0 {
		t.RemoveAfter = config.Duration(24 * time.Hour)
	}
	return &t
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}
