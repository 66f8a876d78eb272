package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Runtime events keep the cache true when something outside the manager
// changes an instance (#7): a kill, an OOM, a pause, a removal.

// Reconnect backoff of the events stream.
const (
	eventBackoffMin = 100 * time.Millisecond
	eventBackoffMax = 30 * time.Second
	// A stream that stayed up this long (or delivered an event) was healthy.
	eventHealthy = 10 * time.Second
)

// watchEvents follows the events stream until ctx ends, reconnecting with
// backoff; a reconnect replays events since the last one seen, then resyncs.
func (m *Manager) watchEvents(ctx context.Context) {
	backoff := eventBackoffMin
	var since time.Time // zero: only new events
	for first := true; ; first = false {
		subscribed := m.now()
		got := false
		errc := make(chan error, 1)
		go func() {
			errc <- m.rt.Watch(ctx, since, m.scopeLabels(), func(ev runtime.Event) {
				got = true
				if !ev.Time.IsZero() {
					since = ev.Time
				}
				m.applyEvent(ev)
			})
		}()
		if !first {
			// Replay covers events after since; listing covers the rest.
			m.resyncWhileUp(ctx, errc)
		}
		err := <-errc
		if ctx.Err() != nil {
			return
		}
		m.trust.eventsDown.Store(true)
		if since.IsZero() {
			since = subscribed.Add(-time.Second) // clock slack between us and dockerd
		}
		if got || m.now().Sub(subscribed) >= eventHealthy {
			backoff = eventBackoffMin
		}
		m.log.WarnContext(ctx, "docker events stream broke, reconnecting", "err", err, "in", backoff)
		if sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, eventBackoffMax)
	}
}

// resyncWhileUp resyncs after a reconnect, with backoff, until the stream
// breaks again (its error left in errc) or stayed up streamSettle past a
// resync: then cached endpoints are trusted again.
func (m *Manager) resyncWhileUp(ctx context.Context, errc chan error) {
	for wait := eventBackoffMin; ; wait = min(2*wait, eventBackoffMax) {
		err := m.resync(ctx)
		if err != nil && ctx.Err() == nil {
			m.log.DebugContext(ctx, "resync after events reconnect failed", "err", err, "retry in", wait)
		}
		if err == nil {
			wait = streamSettle
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case err := <-errc:
			t.Stop()
			errc <- err // for watchEvents: the stream broke again
			return
		case <-t.C:
			if err == nil {
				m.trust.eventsDown.Store(false)
				return
			}
		}
	}
}

// streamSettle is how long a reconnected events stream must stay up after
// its resync before cached endpoints are trusted again.
const streamSettle = time.Second

// idFromName returns the sandbox id a container name binds: this manager's
// runtime.Name (another scope's binds nothing here) or a runtime.LegacyName.
// The name, not the label, binds: a claimed pool container keeps its pool
// labels; pool is its LabelPool, and an unclaimed one binds nothing.
func (m *Manager) idFromName(name, pool string) (string, bool) {
	name = strings.TrimPrefix(name, "/")
	if pool != "" && strings.HasPrefix(name, poolPrefix(pool)) {
		return "", false
	}
	id, ok := runtime.SandboxOf(name)
	if !ok || !config.ValidID(id) || name != m.name(id) && name != runtime.LegacyName(id) {
		return "", false
	}
	return id, true
}

// applyEvent updates the cache from one event. Events that take an instance
// down drop its endpoint and report it gone; starts only update the state:
// readiness is the wake's to establish.
func (m *Manager) applyEvent(ev runtime.Event) {
	if ev.Action == runtime.EventWatchBroken {
		m.trust.watchBroken.Store(m.now().UnixNano())
		return
	}
	if ev.Labels != nil && m.foreign(ev.Labels) != "" {
		return // another scope's container with a name like ours
	}
	if ev.Pool != "" {
		switch ev.Action {
		case runtime.EventRename, runtime.EventDie, runtime.EventStop, runtime.EventKill, runtime.EventOOM, runtime.EventDestroy, runtime.EventPause:
			m.mu.Lock()
			m.dropPoolLocked(ev.ID) // claimed (maybe by another replica) or ended
			m.mu.Unlock()
		case runtime.EventStart:
			if m.caps.SharedPool && strings.HasPrefix(strings.TrimPrefix(ev.Name, "/"), poolPrefix(ev.Pool)) {
				m.mu.Lock()
				m.addPoolLocked(ev.Pool, poolCtr{id: ev.ID, name: strings.TrimPrefix(ev.Name, "/"), spec: ev.Labels[runtime.LabelPoolSpec], added: m.now()})
				m.mu.Unlock()
				return
			}
		}
	}
	var gone []string
	defer func() { m.gone(gone...) }() // after the unlock below
	if ev.Action == runtime.EventRename {
		if id, ok := m.idFromName(ev.OldName, ev.Pool); ok {
			m.mu.Lock()
			if sb := m.sandboxes[id]; sb != nil {
				m.seenLocked(sb)
				sb.state = ""
				gone = append(gone, m.dropLocked(sb))
				sb.last = nil // that container is no longer this sandbox's
			}
			m.mu.Unlock()
		}
	}
	id, ok := m.idFromName(ev.Name, ev.Pool)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sb := m.sandboxes[id]
	if sb == nil && ev.Action != runtime.EventStart && ev.Action != runtime.EventUnpause {
		return // no record to update
	}
	defer func() {
		switch ev.Action {
		case runtime.EventStart, runtime.EventUnpause, runtime.EventPause, runtime.EventDie, runtime.EventStop, runtime.EventOOM, runtime.EventKill, runtime.EventKept, runtime.EventDestroy, runtime.EventRename:
			m.seenLocked(sb) // newer than a re-check's list begun before
		}
	}()
	switch ev.Action {
	case runtime.EventStart, runtime.EventUnpause:
		sb = m.sandboxLocked(id) // started elsewhere: count it as running
		sb.state = runtime.StateRunning
		sb.container, sb.name = ev.ID, strings.TrimPrefix(ev.Name, "/")
		if t := ev.Labels[runtime.LabelTemplate]; t != "" {
			sb.template = t // the record is rebuilt from the instance's own labels
		}
		if ev.Action == runtime.EventStart && ev.Time.After(sb.startedAt) {
			// A start another replica made is no idle time (#26).
			sb.startedAt = ev.Time
		}
	case runtime.EventPause:
		sb.state = runtime.StatePaused
		gone = append(gone, m.dropLocked(sb))
	case runtime.EventDie, runtime.EventStop, runtime.EventOOM:
		if sb.state != runtime.StateExited {
			sb.stoppedAt = m.now()
		}
		sb.state = runtime.StateExited
		gone = append(gone, m.dropLocked(sb))
	case runtime.EventKill: // may be followed by die; either way do not trust the endpoint
		gone = append(gone, m.dropLocked(sb))
	case runtime.EventKept:
		if sb.container == "" || sb.container == ev.ID {
			if sb.state != runtime.StateExited && sb.stopUnderway != ev.ID {
				// A stop now, unless this manager adopted the pod while it stopped:
				// that stop's time is recorded.
				sb.stoppedAt = m.now()
			}
			sb.state = runtime.StateExited
			gone = append(gone, m.dropLocked(sb))
			sb.last = nil // that pod never comes back
		}
	case runtime.EventDestroy:
		if sb.container == "" || sb.container == ev.ID {
			sb.state = ""
			sb.container = ""
			gone = append(gone, m.dropLocked(sb))
			sb.last = nil
		}
	case runtime.EventRename:
		// Renamed to its sandbox's name: a pool claim, whose claimer records the
		// sandbox. A run recorded under the name before was another container's.
		if sb.last != nil && instanceContainer(sb.last.Instance) != ev.ID {
			gone = append(gone, m.dropLocked(sb))
			sb.last = nil
		}
	}
}

// resync follows a reconnect: states from one list, then one lookup per
// cached endpoint (a restart meanwhile keeps the container, not its run).
func (m *Manager) resync(ctx context.Context) error {
	if err := m.refreshStates(ctx); err != nil {
		return err
	}
	type cached struct {
		sb *sandbox
		ep *Endpoint
	}
	var list []cached
	m.mu.RLock()
	for _, sb := range m.sandboxes {
		if ep := sb.ep.Load(); ep != nil {
			list = append(list, cached{sb, ep})
		}
	}
	m.mu.RUnlock()
	for _, x := range list {
		c, err := m.rt.Lookup(ctx, instanceContainer(x.ep.Instance))
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("resync %s: %w", x.sb.id, err)
		}
		if err != nil || !m.serves(c, x.sb.id, x.ep.Instance) {
			m.dropIfCached(x.sb, x.ep)
		}
	}
	return nil
}

// serves reports whether c is still instance, running, under id's name.
func (m *Manager) serves(c runtime.Instance, id, instance string) bool {
	named, ok := m.idFromName(c.Name, c.Labels[runtime.LabelPool])
	return instanceOf(c) == instance && c.State == runtime.StateRunning && ok && named == id
}

// dropIfCached drops sb's endpoint if it is still ep and reports it gone.
func (m *Manager) dropIfCached(sb *sandbox, ep *Endpoint) {
	var gone string
	m.mu.Lock()
	if sb.ep.Load() == ep {
		gone = m.dropLocked(sb)
	}
	m.mu.Unlock()
	m.gone(gone)
}

// checked records that a stillServes check found ep serving at at.
type checked struct {
	ep *Endpoint
	at time.Time
}

// checkValid is how long a check that found an endpoint serving stands.
// Far shorter than any create-and-listen, so no other app can take the
// address within it; it bounds lookups while the stream is down.
const checkValid = 100 * time.Millisecond

// stillServes checks sb's cached ep with the runtime while the events
// stream is down; if its instance no longer runs under the sandbox's name,
// ep is dropped. A runtime that cannot be asked cannot reassign the address
// either: ep is used then (a new connection to it is still confirmed, and
// fails closed: confirm.go). err is ctx's end, which never drops ep.
// Concurrent checks share one detached lookup.
func (m *Manager) stillServes(ctx context.Context, sb *sandbox, ep *Endpoint) (bool, error) {
	if c := sb.checked.Load(); c != nil && c.ep == ep && m.now().Sub(c.at) < checkValid {
		return true, nil
	}
	ch := m.trust.checks.DoChan(sb.id, func() (any, error) {
		ictx, cancel := context.WithTimeout(m.loops.ctx, 10*time.Second)
		defer cancel()
		c, err := m.rt.Lookup(ictx, instanceContainer(ep.Instance))
		if errors.Is(err, runtime.ErrNotFound) || err == nil && !m.serves(c, sb.id, ep.Instance) {
			m.dropIfCached(sb, ep)
			return false, nil
		}
		if err == nil {
			sb.checked.Store(&checked{ep: ep, at: m.now()})
		}
		return true, nil
	})
	select {
	case r := <-ch:
		return r.Val.(bool), nil
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}
