package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The admin operations on sandboxes: list, stop, remove, and what the
// metrics and admin API read without a runtime call.

// List returns all owned sandboxes as the runtime reports them (not the
// unclaimed warm pool).
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	list, err := m.listOwned(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(list))
	for _, c := range list {
		id, ok := m.idFromName(c.Name, c.Labels[runtime.LabelPool])
		if !ok {
			continue // an unclaimed pool container is no sandbox yet
		}
		out = append(out, m.infoOf(id, c))
	}
	return out, nil
}

// Get returns sandbox id as List lists it. Errors are ownedByID's.
func (m *Manager) Get(ctx context.Context, id string) (Info, error) {
	c, err := m.ownedByID(ctx, id)
	if err != nil {
		return Info{}, err
	}
	return m.infoOf(id, c), nil
}

// infoOf is sandbox id's Info, its container c: List's and Get's one view.
func (m *Manager) infoOf(id string, c runtime.Instance) Info {
	info := Info{ID: id, Template: c.Labels[runtime.LabelTemplate], State: c.State, Container: c.ID, Metadata: metadataOf(c.Labels)}
	s, _ := m.recs.Settings(id)
	info.settingsOf(s, m.now())
	if sb := m.lookup(id); sb != nil {
		info.LastActivity = sb.lastActive()
		m.mu.RLock()
		info.StartedAt = sb.startedAt
		m.mu.RUnlock()
		info.LastFailure = sb.diag.failed.Load()
		info.OpenSockets = int(sb.holds.Load())
		info.Wakes = sb.wakes.Load()
		info.WakeSeconds = time.Duration(sb.wakeNanos.Load()).Seconds()
		if c.State == runtime.StateRunning {
			info.Awake = m.awake(sb)
		}
	}
	return info
}

// Stop stops sandbox id. runtime.ErrNotFound if there is none,
// runtime.ErrForeign if its name is on a container this manager does not
// own (left alone).
func (m *Manager) Stop(ctx context.Context, id string) error {
	c, err := m.ownedByID(ctx, id)
	if err == nil {
		m.beforeStop(id)
		err = m.rt.Sleep(ctx, c.ID, runtime.SleepStop)
	}
	if err == nil || errors.Is(err, runtime.ErrNotFound) {
		m.setState(id, runtime.StateExited)
	}
	return err
}

// ErrNoPause: the runtime cannot pause (Kubernetes has no pause: a pod
// stops or runs). Stop instead; the next request wakes it either way.
var ErrNoPause = errors.New("this runtime cannot pause a sandbox; stop it instead (POST .../stop), the next request wakes it")

// ErrNotRunning: pause asked of a sandbox that is not running.
var ErrNotRunning = errors.New("sandbox is not running")

// Pause freezes sandbox id where the runtime can (else ErrNoPause); a
// paused one is no error, one not running is ErrNotRunning. The next
// request (or Resume) unpauses it.
func (m *Manager) Pause(ctx context.Context, id string) error {
	if !m.caps.Pause {
		return ErrNoPause
	}
	c, err := m.ownedByID(ctx, id)
	switch {
	case err != nil:
		return err
	case c.State == runtime.StatePaused:
		return nil
	case c.State != runtime.StateRunning:
		return fmt.Errorf("sandbox %s is %s: %w", id, c.State, ErrNotRunning)
	}
	m.beforeStop(id) // a frozen app would leave its sockets hanging: close them with 1001
	if err := m.rt.Sleep(ctx, c.ID, runtime.SleepPause); err != nil {
		return fmt.Errorf("pause %s: %w", id, err)
	}
	if sb := m.lookup(id); sb != nil {
		m.setStopped(sb, runtime.StatePaused)
	} else {
		m.setState(id, runtime.StatePaused)
	}
	return nil
}

// Resume wakes sandbox id with its own template and waits until it is
// ready, as a request would; it never creates one (runtime.ErrNotFound).
func (m *Manager) Resume(ctx context.Context, id string) (Endpoint, error) {
	c, err := m.ownedByID(ctx, id)
	if err != nil {
		return Endpoint{}, err
	}
	return m.EnsureWith(ctx, id, m.cfg.Templates(c.Labels[runtime.LabelTemplate]), Options{NoCreate: true})
}

// ownedByID looks sandbox id's instance up and checks this manager owns it
// (runtime.ErrNotFound, runtime.ErrForeign; a foreign one is disowned).
func (m *Manager) ownedByID(ctx context.Context, id string) (runtime.Instance, error) {
	if !config.ValidID(id) {
		return runtime.Instance{}, runtime.ErrNotFound
	}
	c, err := m.findID(ctx, id)
	if errors.Is(err, runtime.ErrForeign) {
		m.disown(id)
	}
	return c, err
}

// Remove force-removes sandbox id; errors are Stop's. Either way the
// record keeps a removal mark for a while (tombstone.go).
func (m *Manager) Remove(ctx context.Context, id string) error {
	return m.remove(ctx, id, true)
}

// remove is Remove. stopWakes (a caller's removal, not the reaper's): a
// wake begun before stops at its next step and removes what it made
// (runner.removedMeanwhile); on other replicas the mark written here does
// the same (tombstone.go). The reaper's removal does neither: a request
// waiting on sb.op wants the sandbox back.
func (m *Manager) remove(ctx context.Context, id string, stopWakes bool) error {
	var inFlight bool
	m.mu.Lock()
	if sb := m.sandboxes[id]; sb != nil && stopWakes {
		sb.removals.Add(1)
		inFlight = sb.waking.Load() > 0
	}
	m.mu.Unlock()
	if stopWakes && config.ValidID(id) {
		// The mark first, the lookup after it (tombstone.go).
		if err := m.recs.Mark(ctx, id); err != nil {
			// Without a mark only a start on another replica that is still
			// making its container may outlive this removal.
			m.log.WarnContext(ctx, "removal mark not written: a start of the sandbox begun on another replica may outlive this removal", "sandbox", id, "err", err)
		}
	}
	c, err := m.ownedByID(ctx, id)
	if err == nil {
		m.beforeStop(id)
		err = m.rt.Remove(ctx, c.ID) // another removal under way: done when it is
	}
	if errors.Is(err, runtime.ErrNotFound) && inFlight {
		err = nil
	}
	if err == nil || errors.Is(err, runtime.ErrNotFound) {
		if !stopWakes {
			// Its settings and links go with it (a live mark stays).
			if err := m.recs.Clear(ctx, id, nil); err != nil {
				m.log.WarnContext(ctx, "remove sandbox settings", "sandbox", id, "err", err)
			}
		}
		var gone string
		m.mu.Lock()
		if sb := m.sandboxes[id]; sb != nil {
			gone = m.dropLocked(sb)
			sb.last, sb.state, sb.container = nil, "", ""
			if sb.waking.Load() == 0 {
				delete(m.sandboxes, id) // a wake in flight keeps the record it passes down
				sb.dropped.Store(true)
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
	return int(m.starts.inFlight.Load()), int(m.starts.peak.Load())
}

// States counts the known sandboxes by last known runtime state
// ("unknown" while a wake has not seen its container). No runtime call.
func (m *Manager) States() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int)
	for _, sb := range m.sandboxes {
		st := sb.state
		switch {
		case st != "":
		case sb.waking.Load() == 0:
			// No instance, none coming: no sandbox.
			continue
		default:
			st = "unknown" // a wake not yet seen its container
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
		m.starts.maxRunning.Store(int64(n))
	}
}
