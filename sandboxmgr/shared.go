package sandboxmgr

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Activity every replica can see (#15). Touch and Hold record this
// replica's view; with several replicas, a sandbox busy on B looks idle to
// A. So before the reaper stops a sandbox idle here, it asks the runtime
// for the latest activity any replica caused. On Kubernetes each replica
// writes the sandbox Lease's renewTime (flushLoop) and the reaper reads it
// back. A Docker engine has one gateway per scope, whose view is the whole
// truth: its runtime declares no shared activity. With sockets open,
// max_socket_idle is judged from the Lease too (requests only).

// shared returns the runtime's shared activity signal, if it declares one
// (runtime.Capabilities.Activity).
func (m *Manager) shared() (runtime.Activity, bool) {
	return m.caps.Activity, m.caps.Activity != nil
}

// flushLoop publishes this replica's activity until ctx ends, each
// sandbox's at most once per recordPeriodLocked, so another replica sees
// traffic at most a quarter of the idle timeout old (#26).
func (m *Manager) flushLoop(ctx context.Context, rec runtime.Activity) {
	every(ctx, min(rec.RecordEvery(), flushTick), func() {
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
	})
}

// flushTick is how often flushLoop looks for activity to publish.
const flushTick = time.Second

// recordPeriodLocked is the runtime's period, or a quarter of sb's idle
// timeout if shorter (never below flushTick). m.mu must be held.
func (m *Manager) recordPeriodLocked(sb *sandbox, rec runtime.Activity) time.Duration {
	p := rec.RecordEvery()
	if tpl := m.cfg.Templates(sb.template); tpl != nil && tpl.IdleTimeout > 0 {
		p = min(p, tpl.IdleTimeout.D()/4)
	}
	return max(p, flushTick)
}

// sharedIdle reports whether sb is still idle for limit by the runtime's
// shared signal, else records that activity as sb's.
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

// storeLater raises v to n unless it is later already.
func storeLater(v *atomic.Int64, n int64) {
	for {
		cur := v.Load()
		if n <= cur || v.CompareAndSwap(cur, n) {
			return
		}
	}
}
