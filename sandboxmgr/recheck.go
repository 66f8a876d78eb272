package sandboxmgr

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The bounded re-check (#21). Events (Docker) and the informer's watch
// (Kubernetes) keep the cache true while they flow, but a stream that
// stalls — the connection open, no bytes, no error: a hung engine, a
// silent partition — looks exactly like a quiet one. So every
// Config.RecheckEvery, whatever the stream's health, the manager lists the
// sandboxes it owns (one runtime call) and drops every cached endpoint the
// list does not confirm: the same container, running, on the same address.
// That bounds how long a record can point at an address the runtime gave
// to someone else by RecheckEvery plus one list call; addresses handed out
// through this manager are never shared at all (instance.go).

// trust is what says whether a cached endpoint may be handed out without
// asking the runtime first (distrusted), and the re-check's own state.
type trust struct {
	// eventsDown: the events stream broke and no resync has followed
	// since. No event would tell of a cached endpoint's container ending,
	// and its address may pass to another sandbox's container, so Ensure
	// checks a cached endpoint with the runtime before using it
	// (stillServes).
	eventsDown atomic.Bool
	// watchBroken: when (unix ns) the Kubernetes watch last reported an
	// error; 0 once a re-check after it succeeded.
	watchBroken atomic.Int64
	// recheckFailing: the last re-check failed (logged once).
	recheckFailing atomic.Bool
	checks         singleflight.Group // stillServes lookups, one per sandbox at a time
}

// recheckLoop runs recheck every Config.RecheckEvery until ctx ends.
func (m *Manager) recheckLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.RecheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, m.cfg.RecheckEvery)
		err := m.recheck(rctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		m.noteRecheck(ctx, err)
	}
}

// noteRecheck logs a failing re-check once, as a warning, and its
// recovery: every period would flood the log, debug would hide it.
func (m *Manager) noteRecheck(ctx context.Context, err error) {
	switch {
	case err != nil && !m.trust.recheckFailing.Swap(true):
		m.log.WarnContext(ctx, "re-check of cached sandboxes failed; cached endpoints are not confirmed until it succeeds", "err", err)
	case err != nil:
		m.log.DebugContext(ctx, "re-check of cached sandboxes failed", "err", err)
	case m.trust.recheckFailing.Swap(false):
		m.log.InfoContext(ctx, "re-check of cached sandboxes succeeds again")
	}
}

// recheck drops every cached endpoint that the runtime's list does not
// confirm, and trusts a Kubernetes watch again once a re-check begun
// streamSettle after its last reported break succeeded.
func (m *Manager) recheck(ctx context.Context) error {
	began := m.now()
	m.mu.RLock()
	gen := m.gen // records seen after this know more than the list
	m.mu.RUnlock()
	// Records first: one whose sandbox the list below lacks was written
	// before the list was taken (records.DropOrphans).
	recorded, rerr := m.recs.Reload(ctx, began)
	if rerr != nil {
		m.log.DebugContext(ctx, "re-check of sandbox settings failed", "err", rerr) // Reload logs when it matters
	}
	list, err := m.listOwned(ctx)
	if err != nil {
		return err
	}
	byID := make(map[string]runtime.Instance, len(list))
	for _, c := range list {
		if id, ok := m.idFromName(c.Name, c.Labels[runtime.LabelPool]); ok {
			byID[id] = c
		}
	}
	m.recs.DropOrphans(ctx, recorded, func(id string) bool {
		if _, ok := byID[id]; ok {
			return true
		}
		m.mu.RLock()
		sb := m.sandboxes[id]
		m.mu.RUnlock()
		return sb != nil && sb.waking.Load() > 0
	})
	var gone []string
	m.mu.Lock()
	if m.caps.SharedPool {
		m.syncPoolLocked(list, began)
	}
	for id, c := range byID {
		// Every sandbox the runtime has gets a record rebuilt from its
		// own labels, so every replica knows its template (#21, #26).
		sb := m.sandboxLocked(id)
		if sb.seen > gen {
			continue
		}
		sb.container, sb.state, sb.name = c.ID, c.State, c.Name
		if t := c.Labels[runtime.LabelTemplate]; t != "" {
			sb.template = t
		}
	}
	for id, sb := range m.sandboxes {
		if sb.seen > gen {
			continue // cached or updated after the list was taken (attack21)
		}
		if _, ok := byID[id]; !ok && sb.waking.Load() == 0 {
			sb.container, sb.state = "", ""
		}
		ep := sb.ep.Load()
		if ep == nil {
			continue
		}
		c, ok := byID[id]
		if ok && confirms(c, ep) {
			continue
		}
		gone = append(gone, m.dropLocked(sb))
		if !ok || c.ID != instanceContainer(ep.Instance) {
			sb.last = nil // another container, or none: that run never comes back
		}
		m.log.InfoContext(ctx, "re-check dropped a cached endpoint the runtime does not confirm",
			"sandbox", id, "addr", ep.Addr, "state", c.State)
	}
	m.mu.Unlock()
	m.gone(gone...)
	if at := m.trust.watchBroken.Load(); at != 0 && began.Sub(time.Unix(0, at)) >= streamSettle {
		m.trust.watchBroken.CompareAndSwap(at, 0)
	}
	return nil
}

// confirms reports whether listed container c is still the running
// container behind ep, on ep's address. (A list carries no start time: a
// restart of the same container keeps it this sandbox's, and the events or
// the next wake retire the old run.)
func confirms(c runtime.Instance, ep *Endpoint) bool {
	return c.State == runtime.StateRunning && c.ID == instanceContainer(ep.Instance) &&
		(c.IP == "" || c.IP == addrHost(ep.Addr))
}

// distrusted reports whether a cached endpoint must be checked with the
// runtime before use: the events stream broke (Docker) or the watch
// reported an error (Kubernetes) and no resync has followed.
func (m *Manager) distrusted() bool {
	return m.trust.eventsDown.Load() || m.trust.watchBroken.Load() != 0
}
