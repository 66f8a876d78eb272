package sandboxmgr

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The bounded re-check (#21). Events keep the cache true while they flow,
// but a stalled stream (open, silent: a hung engine, a partition) looks
// exactly like a quiet one. So every Config.RecheckEvery, whatever the
// stream's health, the manager lists what it owns (one runtime call) and
// drops every cached endpoint the list does not confirm. That bounds how
// long a record can point at an address the runtime gave to someone else.
// Within that bound a new connection to such an address is still refused
// by its confirmation (confirm.go): the bound is how long a sandbox's users
// may get errors, not how long they may reach someone else.

// trust says whether a cached endpoint may be handed out without asking the
// runtime (distrusted), and holds the re-check's state.
type trust struct {
	// eventsDown: the events stream broke and no resync has followed, so
	// Ensure checks a cached endpoint with the runtime first (stillServes).
	eventsDown atomic.Bool
	// watchBroken: when (unix ns) the Kubernetes watch last reported an
	// error; 0 once a re-check after it succeeded.
	watchBroken atomic.Int64
	// recheckFailing: the last re-check failed (logged once).
	recheckFailing atomic.Bool
	checks         singleflight.Group // stillServes lookups, one per sandbox at a time
}

func (m *Manager) recheckLoop(ctx context.Context) {
	every(ctx, m.cfg.RecheckEvery, func() {
		rctx, cancel := context.WithTimeout(ctx, m.cfg.RecheckEvery)
		err := m.recheck(rctx)
		cancel()
		if ctx.Err() == nil {
			m.noteRecheck(ctx, err)
		}
	})
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

// recheck drops every cached endpoint the runtime's list does not confirm,
// and trusts a broken watch again once a re-check begun streamSettle after
// its break succeeded.
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
		// Every listed sandbox gets a record from its own labels (#21, #26).
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

// confirms reports whether listed c is still the running container behind
// ep, on its address. (A list has no start time: the events or the next
// wake retire an old run of the same container.)
func confirms(c runtime.Instance, ep *Endpoint) bool {
	return c.State == runtime.StateRunning && c.ID == instanceContainer(ep.Instance) &&
		(c.IP == "" || c.IP == addrHost(ep.Addr))
}

// distrusted reports whether a cached endpoint must be checked with the
// runtime before use (events or watch broken, no resync since).
func (m *Manager) distrusted() bool {
	return m.trust.eventsDown.Load() || m.trust.watchBroken.Load() != 0
}
