package sandboxmgr

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// sandbox is the manager's in-memory record of one sandbox: its cached
// endpoint and its activity. Docker stays the truth for everything else.
type sandbox struct {
	id           string
	ep           atomic.Pointer[Endpoint] // ready endpoint; nil: ask Docker
	lastActivity atomic.Int64             // unix nanoseconds
	holds        atomic.Int64             // open WebSockets / SSE streams
	waking       atomic.Int32             // wakes in progress (0 or 1)
	progress     atomic.Pointer[Progress] // of the last or current wake
	// op serializes a wake with the reaper's stop/pause/remove: a request
	// arriving while the reaper stops the sandbox waits, then wakes it.
	op sync.Mutex

	// guarded by Manager.mu:
	state     string // last known Docker state; "" when unknown
	template  string
	container string
	startedAt time.Time
	stoppedAt time.Time // when this manager saw it stop (reaper, events)
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
		sb = &sandbox{id: id}
		m.sandboxes[id] = sb
	}
	return sb
}

// observe records what Docker said about id's container c. A running
// container with an address becomes the cached endpoint.
func (m *Manager) observe(id string, c ctrInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sb := m.sandboxLocked(id)
	m.observeLocked(sb, c)
	if c.State == stateRunning && c.IP != "" {
		sb.ep.Store(&Endpoint{ID: id, Addr: endpointAddr(c, 0), Template: c.Labels[LabelTemplate]})
	} else {
		sb.ep.Store(nil)
	}
}

// observeLocked copies c's facts into sb. m.mu must be held for writing.
func (m *Manager) observeLocked(sb *sandbox, c ctrInfo) {
	sb.state = c.State
	sb.container = c.ID
	if t := c.Labels[LabelTemplate]; t != "" {
		sb.template = t
	}
	if !c.StartedAt.IsZero() {
		sb.startedAt = c.StartedAt
	}
}

// setState records a state change made by this manager and drops the
// cached endpoint unless the sandbox is running.
func (m *Manager) setState(id, state string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sb := m.sandboxes[id]; sb != nil {
		sb.state = state
		if state != stateRunning {
			sb.ep.Store(nil)
		}
	}
}

// endpointAddr is the address of c's app: its IP and the port recorded at
// creation, else port, else 3000.
func endpointAddr(c ctrInfo, port int) string {
	if p, err := strconv.Atoi(c.Labels[LabelPort]); err == nil && p > 0 && p < 65536 {
		port = p
	}
	if port == 0 {
		port = 3000
	}
	return net.JoinHostPort(c.IP, strconv.Itoa(port))
}

// Touch records activity on id. It is called for every request: one map
// read under a read lock and an atomic store.
func (m *Manager) Touch(id string) {
	m.sandboxFor(id).lastActivity.Store(m.now().UnixNano())
}

// Hold marks an open long-lived connection (WebSocket, SSE) on id until the
// returned func is called. Calling it more than once is harmless. Opening and
// closing both count as activity.
func (m *Manager) Hold(id string) (release func()) {
	sb := m.sandboxFor(id)
	sb.holds.Add(1)
	sb.lastActivity.Store(m.now().UnixNano())
	var once sync.Once
	return func() {
		once.Do(func() {
			sb.holds.Add(-1)
			sb.lastActivity.Store(m.now().UnixNano())
		})
	}
}

// Activity reports when id last saw a request (zero if never, in this
// process) and how many long-lived connections it has open.
func (m *Manager) Activity(id string) (last time.Time, open int) {
	sb := m.lookup(id)
	if sb == nil {
		return time.Time{}, 0
	}
	return sb.lastActive(), int(sb.holds.Load())
}
