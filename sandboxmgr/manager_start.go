package sandboxmgr

import (
	"context"
	"errors"
	"time"
)

// Start reconciles with Docker (adopts managed containers, ensures the
// network) and starts background work. It returns ErrUnavailable if Docker
// cannot be reached; the caller may still serve and retry.
//
// Background work (the events stream, ...) starts on the first call even if
// Docker is down, and keeps retrying; Close stops it.
func (m *Manager) Start(ctx context.Context) error {
	m.bgOnce.Do(m.startBackground)
	if err := m.ensureNetwork(ctx); err != nil {
		return err
	}
	// Settings and links before the first request: a restart keeps a
	// revoked link revoked and a private toggle private (package records).
	if _, err := m.recs.Reload(ctx, time.Time{}); err != nil {
		return err
	}
	list, err := m.listOwned(ctx)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(list))
	removed := 0
	for _, c := range list {
		if m.halfMade(c) {
			// A gateway killed between create and start left it; the next
			// request makes a whole one.
			if err := m.eng.Remove(ctx, c.ID); err != nil && !errors.Is(err, ErrNoContainer) {
				m.log.WarnContext(ctx, "remove half-made container", "container", c.Name, "err", err)
			} else {
				removed++
			}
			continue
		}
		id, ok := idFromName(c.Name, c.Labels[LabelPool])
		if !ok {
			if c.Labels[LabelPool] != "" {
				m.adoptPool(ctx, c)
			}
			continue
		}
		seen[id] = true
		if c.State == stateRunning && c.StartedAt.IsZero() {
			// Docker's list has no start time; running ones are worth one
			// inspect (the reaper needs it). A failure here is not fatal.
			// Kubernetes lists whole pods: no call per sandbox.
			if full, err := m.inspectOwned(ctx, c.ID); err == nil {
				c = full
			}
		}
		m.observe(id, c)
	}
	var gone []string
	m.mu.Lock()
	for id, sb := range m.sandboxes {
		if !seen[id] {
			gone = append(gone, m.dropLocked(sb))
			sb.last = nil
			sb.state = ""
		}
	}
	m.mu.Unlock()
	m.gone(gone...)
	m.log.InfoContext(ctx, "sandboxes adopted", "count", len(seen), "half_made_removed", removed)
	return nil
}

// halfMade reports a container created but never started, older than
// Config.StaleCreate.
func (m *Manager) halfMade(c ctrInfo) bool {
	if c.State != stateCreated {
		return false
	}
	return m.cfg.StaleCreate < 0 || (!c.Created.IsZero() && m.now().Sub(c.Created) >= m.cfg.StaleCreate)
}

// startBackground starts the loops Close waits for.
func (m *Manager) startBackground() {
	m.mu.RLock()
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return
	}
	m.bg.Go(func() { m.watchEvents(m.ctx) })
	if a := m.caps.Activity; a != nil && a.RecordEvery() > 0 {
		m.bg.Go(func() { m.flushLoop(m.ctx, a) })
	}
	if m.cfg.ReapEvery > 0 {
		m.bg.Go(func() { m.reapLoop(m.ctx) })
	}
	if m.cfg.RecheckEvery > 0 {
		m.bg.Go(func() { m.recheckLoop(m.ctx) })
	}
	if m.cfg.ListTemplates != nil {
		m.bg.Go(func() { m.poolLoop(m.ctx) })
	}
}

// Close stops background work and waits for it. Wakes in flight are
// canceled. Containers keep running.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.bgOnce.Do(func() {}) // no background work starts after this
	m.wg.Wait()
	m.bg.Wait()
	return m.stop()
}
