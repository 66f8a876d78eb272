package sandboxmgr

import (
	"context"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Activity every replica can see (#15). Touch and Hold record what this
// replica sees, in its memory; with several replicas behind one load
// balancer, a sandbox busy on replica B looks idle to replica A. Before
// the reaper stops a sandbox that looks idle here, it asks the runtime for
// the latest activity any replica could have caused. On Kubernetes each
// replica writes the sandbox Lease's renewTime from its own view, at most
// once per kube.Config.ActivityEvery or a quarter of the template's idle
// timeout, whichever is shorter, per sandbox (flushLoop), and the reaper
// reads it back (one GET per idle decision). A wake that made a sandbox
// ready records that moment, so a slow re-create is not judged idle from
// when it began. A Docker engine is served by one gateway per scope, whose
// own view is the whole truth: its runtime declares no shared activity.
//
// A sandbox is stopped only when neither this replica's view nor the shared
// signal saw activity for idle_timeout. With sockets open, max_socket_idle
// is judged from the Lease too (requests only).

// shared returns the runtime's shared activity signal, if it declares one
// (runtime.Capabilities.Activity).
func (m *Manager) shared() (runtime.Activity, bool) {
	return m.caps.Activity, m.caps.Activity != nil
}

// flushLoop publishes this replica's activity until ctx ends. A sandbox's
// activity is written at most once per recordPeriod: ActivityEvery, or a
// quarter of its template's idle timeout if that is shorter, so another
// replica deciding on idle sees traffic that is at most a quarter of the
// timeout old (#26: an 8 s idle timeout works across replicas with no
// other setting).
func (m *Manager) flushLoop(ctx context.Context, rec runtime.Activity) {
	t := time.NewTicker(min(rec.RecordEvery(), flushTick))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := m.now()
		m.mu.RLock()
		var due []*sandbox
		var names []string
		for _, sb := range m.sandboxes {
			if sb.state == runtime.StateRunning && sb.lastActivity.Load() > sb.flushed.Load() &&
				now.Sub(time.Unix(0, sb.flushedAt.Load())) >= m.recordPeriodLocked(sb, rec) {
				due, names = append(due, sb), append(names, m.nameLocked(sb))
			}
		}
		m.mu.RUnlock()
		for i, sb := range due {
			at := sb.lastActivity.Load()
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := rec.RecordActivity(rctx, names[i], time.Unix(0, at))
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					m.log.DebugContext(ctx, "record activity failed", "sandbox", sb.id, "err", err)
				}
				continue
			}
			sb.flushed.Store(at)
			sb.flushedAt.Store(now.UnixNano())
		}
	}
}

// flushTick is how often flushLoop looks for activity to publish.
const flushTick = time.Second

// recordPeriodLocked is how often sb's activity may be published: the
// runtime's period, or a quarter of sb's idle timeout if shorter (never
// below flushTick). m.mu must be held.
func (m *Manager) recordPeriodLocked(sb *sandbox, rec runtime.Activity) time.Duration {
	p := rec.RecordEvery()
	if tpl := m.cfg.Templates(sb.template); tpl != nil && tpl.IdleTimeout > 0 {
		p = min(p, tpl.IdleTimeout.D()/4)
	}
	return max(p, flushTick)
}

// sharedIdle asks the engine whether another replica kept sb active. It
// returns true if sb is still idle for limit, and otherwise records the
// shared activity as sb's (so the reaper waits a full limit from it).
func (m *Manager) sharedIdle(ctx context.Context, sb *sandbox, limit time.Duration) bool {
	sa, ok := m.shared()
	if !ok {
		return true
	}
	m.mu.RLock()
	c := runtime.Instance{ID: sb.container, Name: m.nameLocked(sb)}
	m.mu.RUnlock()
	at, err := sa.LastActivity(ctx, sb.id, c)
	if err != nil {
		// Not knowing is no reason to stop a sandbox someone may be using.
		m.log.DebugContext(ctx, "shared activity unknown", "sandbox", sb.id, "err", err)
		return false
	}
	if m.now().Sub(at) < limit {
		storeLater(&sb.sharedAt, at.UnixNano())
		storeLater(&sb.lastActivity, at.UnixNano())
		return false
	}
	return true
}

func storeLater(v interface {
	Load() int64
	CompareAndSwap(old, new int64) bool
}, n int64) {
	for {
		cur := v.Load()
		if n <= cur || v.CompareAndSwap(cur, n) {
			return
		}
	}
}
