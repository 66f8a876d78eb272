package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"

	"github.com/previewgate/previewgate/config"
)

// The admin operations on sandboxes: list, stop, remove, and what the
// metrics and admin API read without a runtime call.

// List returns all managed sandboxes as Docker reports them (not the
// unclaimed warm pool).
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	list, err := m.listOwned(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(list))
	for _, c := range list {
		id, ok := idFromName(c.Name, c.Labels[LabelPool])
		if !ok {
			continue // an unclaimed pool container is no sandbox yet
		}
		info := Info{ID: id, Template: c.Labels[LabelTemplate], State: c.State, Container: c.ID}
		if sb := m.lookup(id); sb != nil {
			info.LastActivity = sb.lastActive()
			m.mu.RLock()
			info.StartedAt = sb.startedAt
			m.mu.RUnlock()
			info.LastFailure = sb.diag.failed.Load()
		}
		out = append(out, info)
	}
	return out, nil
}

// Stop stops sandbox id. ErrNoContainer if there is none,
// ErrForeignContainer if its name is on a container this manager does not
// own (left alone).
func (m *Manager) Stop(ctx context.Context, id string) error {
	c, err := m.ownedByID(ctx, id)
	if err == nil {
		m.beforeStop(id)
		err = m.eng.Sleep(ctx, c.ID, runtime.SleepStop)
	}
	if err == nil || errors.Is(err, ErrNoContainer) {
		m.setState(id, stateExited)
	}
	return err
}

// ownedByID inspects sandbox id's container and checks that this manager
// owns it (a foreign one also drops what was cached for id).
func (m *Manager) ownedByID(ctx context.Context, id string) (ctrInfo, error) {
	if !config.ValidID(id) {
		return ctrInfo{}, ErrNoContainer
	}
	c, err := m.inspectOwned(ctx, ContainerName(id))
	if errors.Is(err, ErrForeignContainer) {
		m.disown(id)
	}
	return c, err
}

// Remove force-removes sandbox id. ErrNoContainer if there is none,
// ErrForeignContainer if its name is on a container this manager does not
// own (left alone).
func (m *Manager) Remove(ctx context.Context, id string) error {
	c, err := m.ownedByID(ctx, id)
	if err == nil {
		m.beforeStop(id)
		err = m.eng.Remove(ctx, c.ID)
	}
	if err == nil || errors.Is(err, ErrNoContainer) {
		m.forgetRecord(ctx, id) // its settings and links go with it
		var gone string
		m.mu.Lock()
		if sb := m.sandboxes[id]; sb != nil {
			gone = m.dropLocked(sb)
			sb.last, sb.state, sb.container = nil, "", ""
			if sb.waking.Load() == 0 {
				delete(m.sandboxes, id) // a wake in flight keeps the record it passes down
			}
		}
		m.mu.Unlock()
		m.gone(gone)
	}
	return err
}

// StartStats reports start slots held now and the most ever held at once
// (never more than MaxConcurrentStarts).
func (m *Manager) StartStats() (inFlight, peak int) {
	return int(m.startsInFlight.Load()), int(m.peakStarts.Load())
}

// States counts the sandboxes this manager knows by their last known Docker
// state ("unknown" when not yet seen). For metrics; no Docker call.
func (m *Manager) States() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int)
	for _, sb := range m.sandboxes {
		st := sb.state
		if st == "" {
			st = "unknown"
		}
		out[st]++
	}
	return out
}

// SetMaxRunning changes the cap on running sandboxes (a config reload).
// Running sandboxes above a lowered cap keep running; new starts wait
// until there is room.
func (m *Manager) SetMaxRunning(n int) {
	if n > 0 {
		m.maxRunning.Store(int64(n))
	}
}

// MissingImages returns "template: image" for each of tpls whose image the
// runtime does not have, in template order: a sandbox of such a template
// cannot start (the engine pulls nothing). Kubernetes pulls images itself:
// none are reported there.
func (m *Manager) MissingImages(ctx context.Context, tpls []*config.Template) ([]string, error) {
	var out []string
	for _, t := range tpls {
		if t == nil || t.Image == "" {
			continue
		}
		ok, err := m.HasImage(ctx, t.Image)
		if err != nil {
			return out, fmt.Errorf("image %s: %w", t.Image, err)
		}
		if !ok {
			out = append(out, t.Name+": image "+t.Image)
		}
	}
	return out, nil
}
