package sandboxmgr

import "time"

// Listener is told when sandboxes and instances go away, so whoever holds
// connections to them can close them (the gateway). Its methods are never
// called under a lock of the manager and must not block long.
type Listener interface {
	// BeforeStop is called before sandbox id is stopped or removed with
	// long-lived connections maybe open (the reaper's max_socket_idle, Stop,
	// Remove), so the gateway can close them with 1001.
	BeforeStop(id string)
	// InstanceGone is called with an Endpoint.Instance as soon as the
	// manager learns it can no longer be trusted (instance.go lists when),
	// from the goroutine that learned it; the gateway closes its pooled
	// connections. Every instance handed out is reported before or when it
	// ends; a report may repeat, and an unpaused instance may carry
	// connections opened after its report.
	InstanceGone(instance string)
}

// Observer is told about wakes, for metrics; it must be cheap and safe for
// concurrent use.
type Observer interface {
	// ColdStart is called for every wake that made a stopped or absent
	// sandbox ready: kind is "wake" (start or unpause), "create" or "pool".
	ColdStart(kind string, took time.Duration)
	// WakePhase is called once per phase of every ended wake (TimingName's).
	WakePhase(template, phase string, took time.Duration)
}

// SetListener makes l the manager's Listener (nil: none). Reports made
// before it are lost: call it before Start and the first Ensure.
func (m *Manager) SetListener(l Listener) {
	if l == nil {
		m.listener.Store(nil)
		return
	}
	m.listener.Store(&l)
}

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

func (m *Manager) coldStart(kind string, took time.Duration) {
	if m.cfg.Observer != nil {
		m.cfg.Observer.ColdStart(kind, took)
	}
}
