package sandboxmgr

import "time"

// Listener is told when sandboxes and container instances go away, so
// whoever holds connections to them can close them. The gateway implements
// it; set it with Manager.SetListener. Its methods are never called under a
// lock of the manager and must not block long.
type Listener interface {
	// BeforeStop is called before sandbox id is stopped or removed with
	// long-lived connections possibly open: by the reaper
	// (max_socket_idle) and by Stop and Remove (the admin API), so the
	// gateway can close them with 1001 (going away).
	BeforeStop(id string)
	// InstanceGone is called with an Endpoint.Instance as soon as the
	// manager learns that instance can no longer be trusted: an event says
	// its container died, stopped, was killed or OOM-killed, paused,
	// destroyed or renamed away; Forget, Stop or Remove dropped it; the
	// reaper stopped or paused it; a newer wake, the reconciliation at
	// Start or the resync after an events reconnect found another
	// container or run (or none) under its name. The gateway closes every
	// pooled connection of the instance. Every instance ever handed out in
	// an Endpoint is reported before or when it ends (the manager keeps
	// the last instance per sandbox, so a die event arriving after Forget
	// still reports it); a report may repeat. A paused container keeps its
	// instance when unpaused, so connections opened after a report may
	// carry it again. It is called from the goroutine that learned it (a
	// request's, the events', the reaper's).
	InstanceGone(instance string)
}

// Observer is told about cold starts, for metrics. ColdStart must be cheap
// and safe for concurrent use.
type Observer interface {
	// ColdStart is called for every wake that made a sandbox ready that
	// was not running: kind is "wake" (start or unpause), "create" or
	// "pool" (claimed from the warm pool).
	ColdStart(kind string, took time.Duration)
	// WakePhase is called once per phase of every wake that ended (ready
	// or failed): how long it spent in phase (TimingName's names).
	WakePhase(template, phase string, took time.Duration)
}

// SetListener makes l the manager's Listener; nil means none. It may be
// called at any time: the gateway, which needs the manager to be built, is
// set after it. Reports made before it are lost, so call it before Start
// and before the first Ensure.
func (m *Manager) SetListener(l Listener) {
	if l == nil {
		m.listener.Store(nil)
		return
	}
	m.listener.Store(&l)
}

// beforeStop tells the Listener that id is about to go.
func (m *Manager) beforeStop(id string) {
	if l := m.listener.Load(); l != nil {
		(*l).BeforeStop(id)
	}
}

// gone reports retired instances to the Listener. m.mu must not be held.
func (m *Manager) gone(insts ...string) {
	l := m.listener.Load()
	if l == nil {
		return
	}
	for _, inst := range insts {
		if inst != "" {
			(*l).InstanceGone(inst)
		}
	}
}

// coldStart tells the Observer about a cold start of kind.
func (m *Manager) coldStart(kind string, took time.Duration) {
	if m.cfg.Observer != nil {
		m.cfg.Observer.ColdStart(kind, took)
	}
}
