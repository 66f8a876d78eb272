package sandboxmgr

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// sandbox is the manager's record of one sandbox (#21). The runtime is the
// truth: the record is rebuilt from the instance's own labels at Start, from
// events, by every re-check and every wake, and is only made for owned
// instances (scope.go). A wake passes its record down rather than looking
// the id up again.
//
// Lock discipline:
//   - what the runtime said (last, state, template, container, startedAt,
//     stoppedAt, stopRecorded, stopUnderway) is guarded by Manager.mu, like
//     the map of records and addrs;
//   - what every request touches (ep, lastActivity, holds) is atomic, so the
//     hot path takes only Manager.mu's read lock; ep is only stored under
//     Manager.mu, so it never disagrees with last and addrs for longer than
//     a reader's load;
//   - the wake's bookkeeping (waking, progress, checked, diag, flushed) is
//     atomic, written by the one goroutine owning that step; op serializes
//     a wake with the reaper's stop.
//
// No lock is held across a runtime call.
type sandbox struct {
	id           string
	m            *Manager                    // whose record it is (handle.go)
	dropped      atomic.Bool                 // dropped from the manager's map (a Remove): a handle finds the id's record of now
	ep           atomic.Pointer[Endpoint]    // ready endpoint; nil: ask the runtime
	lastActivity atomic.Int64                // unix nanoseconds
	holds        atomic.Int64                // open WebSockets / SSE streams
	waking       atomic.Int32                // wakes in progress (0 or 1)
	flushed      atomic.Int64                // lastActivity last published (shared.go)
	flushedAt    atomic.Int64                // when it was (unix ns)
	progress     atomic.Pointer[Progress]    // of the last or current wake
	marks        atomic.Pointer[[]PhaseMark] // when each of its phases began (progress.go)
	checked      atomic.Pointer[checked]     // last stillServes check that found ep serving
	sharedAt     atomic.Int64                // latest activity the runtime's shared signal reported (unix ns; shared.go)
	wakes        atomic.Int64                // wakes this manager made (create, claim, start, unpause)
	wakeNanos    atomic.Int64                // their total time
	removals     atomic.Int64                // Remove calls on this record: a wake begun before one neither creates nor starts (run.go)
	diag         diag                        // the wake's output and timing (failure.go)
	// op serializes a wake with the reaper's stop/pause/remove.
	op sync.Mutex

	// guarded by Manager.mu:
	// last is the endpoint last cached; it stays after the cache is dropped
	// until another run replaces it, so a late event still reports it gone.
	last      *Endpoint
	state     string // last known runtime state; "" when unknown
	template  string
	container string
	name      string // the instance's name (an earlier version's, maybe); "": unknown
	startedAt time.Time
	stoppedAt time.Time // when this manager saw it stop (reaper, events)
	// stopRecorded is when the runtime recorded its stop; zero if unknown.
	stopRecorded time.Time
	// stopUnderway is the instance last observed already being stopped: its
	// end is that stop ending, not a stop now.
	stopUnderway string
	// seen is Manager.gen when this record last learned something newer than a
	// list; the re-check leaves records seen after its list began alone.
	seen uint64
}

func (sb *sandbox) countWake(took time.Duration) {
	sb.wakes.Add(1)
	sb.wakeNanos.Add(int64(took))
}

func (sb *sandbox) lastActive() time.Time {
	if n := sb.lastActivity.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (m *Manager) lookup(id string) *sandbox {
	m.mu.RLock()
	sb := m.sandboxes[id]
	m.mu.RUnlock()
	return sb
}

// sandboxFor returns id's record, making it if needed.
func (m *Manager) sandboxFor(id string) *sandbox {
	if sb := m.lookup(id); sb != nil {
		return sb
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sandboxLocked(id)
}

// sandboxLocked returns id's record, making it if needed. m.mu must be held
// for writing.
func (m *Manager) sandboxLocked(id string) *sandbox {
	sb := m.sandboxes[id]
	if sb == nil {
		sb = &sandbox{id: id, m: m}
		m.sandboxes[id] = sb
	}
	return sb
}

// observe records what the runtime said about id's instance c: a running
// one with a start time and an address becomes the cached endpoint;
// anything else retires it.
func (m *Manager) observe(id string, c runtime.Instance) {
	m.mu.Lock()
	sb := m.sandboxLocked(id)
	gone := []string{m.observeLocked(sb, c)}
	if inst := instanceOf(c); c.State == runtime.StateRunning && c.IP != "" && inst != "" {
		ep := &Endpoint{ID: id, Addr: endpointAddr(c, 0), Template: c.Labels[runtime.LabelTemplate], Instance: inst}
		gone = append(gone, m.cacheLocked(sb, ep)...)
	} else {
		gone = append(gone, m.dropLocked(sb))
	}
	m.mu.Unlock()
	m.gone(gone...)
}

// observeLocked copies c's facts into sb and returns the instance they
// retire, to report with m.gone. m.mu must be held for writing.
func (m *Manager) observeLocked(sb *sandbox, c runtime.Instance) (gone string) {
	gone = m.retireLocked(sb, c)
	m.seenLocked(sb)
	sb.state = c.State
	sb.container, sb.name = c.ID, c.Name
	if t := c.Labels[runtime.LabelTemplate]; t != "" {
		sb.template = t
	}
	if !c.StartedAt.IsZero() {
		sb.startedAt = c.StartedAt
	}
	sb.stopRecorded = c.StoppedAt
	sb.stopUnderway = ""
	if c.State == runtime.StateRemoving && !c.StoppedAt.IsZero() {
		sb.stopUnderway = c.ID
	}
	return gone
}

// setState records a state change made by this manager, dropping the
// endpoint unless running.
func (m *Manager) setState(id, state string) {
	var gone string
	m.mu.Lock()
	if sb := m.sandboxes[id]; sb != nil {
		m.seenLocked(sb)
		sb.state = state
		if state != runtime.StateRunning {
			gone = m.dropLocked(sb)
		}
	}
	m.mu.Unlock()
	m.gone(gone)
}

// nameLocked is the name of sb's instance: as the runtime last said, else
// the one this manager gives it. m.mu must be held.
func (m *Manager) nameLocked(sb *sandbox) string {
	if sb.name != "" {
		return sb.name
	}
	return m.name(sb.id)
}

// endpointAddr is the address of c's app: its IP and the port recorded at
// creation, else port, else 3000.
func endpointAddr(c runtime.Instance, port int) string {
	if p, err := strconv.Atoi(c.Labels[runtime.LabelPort]); err == nil && p > 0 && p < 65536 {
		port = p
	}
	if port == 0 {
		port = 3000
	}
	return net.JoinHostPort(c.IP, strconv.Itoa(port))
}
