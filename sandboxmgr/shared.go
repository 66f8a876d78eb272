package sandboxmgr

import (
	"context"
	"time"
)

// Activity every replica can see (#15). Touch and Hold record what this
// replica sees, in its memory; with several replicas behind one load
// balancer, a sandbox busy on replica B looks idle to replica A. Before
// the reaper stops a sandbox that looks idle here, it asks the runtime for
// the latest activity any replica could have caused:
//
//   - Kubernetes: each replica writes the sandbox Lease's renewTime from its
//     own view, at most once per KubeConfig.ActivityEvery per sandbox
//     (flushLoop), and the reaper reads it back (one GET per idle decision).
//   - Docker, with Config.Replicas above 1 (docker.replicas): the
//     container's own network counters (the stats API), which move whenever
//     any replica talks to it. Nothing is written. The reaper samples them
//     from half the idle timeout on, so a sandbox idle everywhere stops
//     between 1 and 1.5 times idle_timeout after its last request. Traffic
//     the app makes on its own (an npm fetch, or a sandbox that keeps
//     itself awake on purpose) also counts, which is why one replica, the
//     default, does not read them: its own view is complete.
//
// A sandbox is stopped only when neither this replica's view nor the shared
// signal saw activity for idle_timeout. With sockets open, max_socket_idle
// is judged on Kubernetes from the Lease (requests only), on Docker from
// this replica's view alone: the counters move with the sockets' own
// traffic.

// sharedActivity is implemented by engines whose replicas can see each
// other's traffic.
type sharedActivity interface {
	// LastActivity returns the latest activity of sandbox id (container c)
	// that any replica caused, as far as the engine knows; zero if unknown.
	LastActivity(ctx context.Context, id string, c ctrInfo) (time.Time, error)
	// sampleEarly reports whether LastActivity should be asked from half
	// the idle timeout on (a sampled signal needs a baseline), not only
	// when the sandbox looks idle.
	sampleEarly() bool
	// shares reports whether the signal is to be asked at all.
	shares() bool
}

// shared returns the engine's shared activity signal, if it has one in use.
func (m *Manager) shared() (sharedActivity, bool) {
	sa, ok := m.eng.(sharedActivity)
	return sa, ok && sa.shares()
}

// activityRecorder is implemented by engines where replicas publish their
// activity (Kubernetes). RecordActivity is called at most once per every
// per sandbox by each replica.
type activityRecorder interface {
	RecordActivity(ctx context.Context, id string, at time.Time) error
	recordEvery() time.Duration
}

// flushLoop publishes this replica's activity until ctx ends.
func (m *Manager) flushLoop(ctx context.Context, rec activityRecorder) {
	t := time.NewTicker(rec.recordEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.mu.RLock()
		var due []*sandbox
		for _, sb := range m.sandboxes {
			if sb.state == stateRunning && sb.lastActivity.Load() > sb.flushed.Load() {
				due = append(due, sb)
			}
		}
		m.mu.RUnlock()
		for _, sb := range due {
			at := sb.lastActivity.Load()
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := rec.RecordActivity(rctx, sb.id, time.Unix(0, at))
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					m.log.DebugContext(ctx, "record activity failed", "sandbox", sb.id, "err", err)
				}
				continue
			}
			sb.flushed.Store(at)
		}
	}
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
	c := ctrInfo{ID: sb.container, Name: ContainerName(sb.id)}
	m.mu.RUnlock()
	at, err := sa.LastActivity(ctx, sb.id, c)
	if err != nil {
		// Not knowing is no reason to stop a sandbox someone may be using.
		m.log.DebugContext(ctx, "shared activity unknown", "sandbox", sb.id, "err", err)
		return false
	}
	if m.now().Sub(at) < limit {
		storeLater(&sb.lastActivity, at.UnixNano())
		return false
	}
	return true
}

// sharedSampled reports an engine whose shared signal is sampled traffic
// counters (Docker), which cannot tell requests from socket traffic.
func (m *Manager) sharedSampled() bool {
	sa, ok := m.shared()
	return ok && sa.sampleEarly()
}

// sampleShared lets a sampled signal take its baseline before sb looks
// idle. Called by the reaper for a running sandbox, idle here for idle.
func (m *Manager) sampleShared(ctx context.Context, sb *sandbox, idle, limit time.Duration) {
	sa, ok := m.shared()
	if !ok || !sa.sampleEarly() || idle < limit/2 || idle >= limit {
		return
	}
	if last := sb.sampledAt.Load(); last != 0 && m.now().Sub(time.Unix(0, last)) < max(limit/8, m.cfg.ReapEvery) {
		return
	}
	sb.sampledAt.Store(m.now().UnixNano())
	m.sharedIdle(ctx, sb, limit)
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
