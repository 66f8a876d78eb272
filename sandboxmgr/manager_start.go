package sandboxmgr

import (
	"context"
	"errors"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Start reconciles with the runtime (adopts owned instances, ensures the
// network) and starts the background work, which keeps retrying until
// Close. runtime.ErrUnavailable if the runtime cannot be reached; the
// caller may still serve and retry.
func (m *Manager) Start(ctx context.Context) error {
	m.loops.once.Do(m.startBackground)
	if err := m.ensureNetwork(ctx); err != nil {
		return err
	}
	// Records before the first request: a revoked link stays revoked.
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
			// Left by a gateway killed between create and start.
			if err := m.rt.Remove(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
				m.log.WarnContext(ctx, "remove half-made container", "container", c.Name, "err", err)
			} else {
				removed++
			}
			continue
		}
		id, ok := m.idFromName(c.Name, c.Labels[runtime.LabelPool])
		if !ok {
			if c.Labels[runtime.LabelPool] != "" {
				m.adoptPool(ctx, c)
			}
			continue
		}
		seen[id] = true
		if c.State == runtime.StateRunning && c.StartedAt.IsZero() {
			// A Docker list has no start time; the reaper needs it (one lookup
			// per running sandbox; a failure is not fatal).
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
func (m *Manager) halfMade(c runtime.Instance) bool {
	if c.State != runtime.StateCreated {
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
	m.loops.bg.Go(func() { m.watchEvents(m.loops.ctx) })
	if a := m.caps.Activity; a != nil && a.RecordEvery() > 0 {
		m.loops.bg.Go(func() { m.flushLoop(m.loops.ctx, a) })
	}
	if m.cfg.ReapEvery > 0 {
		m.loops.bg.Go(func() { every(m.loops.ctx, m.cfg.ReapEvery, func() { m.reapOnce(m.loops.ctx) }) })
	}
	if m.cfg.RecheckEvery > 0 {
		m.loops.bg.Go(func() { m.recheckLoop(m.loops.ctx) })
	}
	if m.cfg.ListTemplates != nil {
		m.loops.bg.Go(func() { m.poolLoop(m.loops.ctx) })
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
	m.loops.cancel()
	m.loops.once.Do(func() {}) // no background work starts after this
	m.loops.wg.Wait()
	m.loops.bg.Wait()
	return m.rt.Close()
}
