package sandboxmgr

import (
	"context"
	"errors"
	"time"

	"github.com/previewgate/previewgate/config"
)

// The idle reaper (#7). Per sandbox, from the activity the gateway reports
// (Touch, Hold) and the template of the sandbox's container:
//
//   - running, no open socket, no request for idle_timeout: stop (or pause,
//     per idle_action);
//   - running with open sockets but no request for max_socket_idle: stop
//     anyway (a tab left open overnight keeps its HMR socket alive forever),
//     calling Config.BeforeStop first so the gateway closes the sockets with
//     1001;
//   - stopped (or paused) for remove_after: remove.
//
// Activity lives in memory. After a gateway restart a sandbox counts as
// active from the restart (or from its container's start, if later), so a
// restart never reaps at once what it cannot judge. A stop or pause is
// serialized with wakes (sandbox.op): a request arriving meanwhile waits for
// the stop and then wakes the sandbox again.

// reapLoop runs the reaper every Config.ReapEvery until ctx ends.
func (m *Manager) reapLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.ReapEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.reapOnce(ctx)
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

// reapOnce looks at every sandbox once.
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

// decide returns what to do with sb now. m.mu must be held (for reading).
func (m *Manager) decideLocked(sb *sandbox, tpl *config.Template, now time.Time) reapAction {
	last := latest(sb.lastActive(), sb.startedAt, m.born)
	switch sb.state {
	case stateRunning:
		idle := now.Sub(last)
		if sb.holds.Load() == 0 {
			if idle >= tpl.IdleTimeout.D() {
				return reapIdle
			}
		} else if idle >= tpl.MaxSocketIdle.D() {
			return reapSockets
		}
	case stateExited, statePaused:
		if now.Sub(latest(last, sb.stoppedAt)) >= tpl.RemoveAfter.D() {
			return reapRemove
		}
	}
	return reapNothing
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
	act := m.decideLocked(sb, tpl, m.now())
	m.mu.RUnlock()
	if act == reapNothing {
		return
	}
	name := ContainerName(sb.id)
	log := m.log.With("sandbox", sb.id)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	switch act {
	case reapIdle, reapSockets:
		sb.ep.Store(nil) // new requests go through Ensure and wait for sb.op
		m.mu.RLock()
		again := m.decideLocked(sb, tpl, m.now())
		m.mu.RUnlock()
		if again != act {
			return // a request came in meanwhile; it re-probes at worst
		}
		if act == reapSockets && m.cfg.BeforeStop != nil {
			m.cfg.BeforeStop(sb.id)
		}
		if act == reapIdle && tpl.IdleAction == config.IdlePause {
			err = m.eng.Pause(ctx, name)
			if err == nil {
				m.setStopped(sb, statePaused)
			}
		} else {
			err = m.eng.Stop(ctx, name)
			if err == nil {
				m.setStopped(sb, stateExited)
			}
		}
	case reapRemove:
		err = m.Remove(ctx, sb.id)
	}
	if errors.Is(err, ErrNoContainer) {
		m.setStopped(sb, "")
		return
	}
	if err != nil {
		// The cached endpoint is gone; the next request inspects Docker.
		log.WarnContext(ctx, "idle reaper failed", "action", act.String(), "err", err)
		return
	}
	log.InfoContext(ctx, "idle sandbox reaped", "action", act.String())
}

func (m *Manager) setStopped(sb *sandbox, state string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sb.state = state
	sb.stoppedAt = m.now()
	sb.ep.Store(nil)
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
