package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Creating a container from a template, its network, and the start slots
// and running count that bound how many start at once.

// starts bounds creates and starts in flight (MaxConcurrentStarts), the
// wakes waiting (StartQueue), and with Manager.reserved MaxRunning.
type starts struct {
	slots  chan struct{} // start/create slots (MaxConcurrentStarts)
	queued chan struct{} // waiting for a slot (StartQueue)
	// inFlight counts held start slots; peak is its maximum.
	inFlight, peak atomic.Int64
	maxRunning     atomic.Int64 // Config.MaxRunning, changeable live
}

func (s *starts) init(cfg Config) {
	s.slots, s.queued = make(chan struct{}, cfg.MaxConcurrentStarts), make(chan struct{}, cfg.StartQueue)
	s.maxRunning.Store(int64(cfg.MaxRunning))
}

// network is the sandboxes' network, made once per manager (again if
// removed behind its back).
type network struct {
	ready atomic.Bool        // known to exist
	make  singleflight.Group // one Isolate at a time
}

// ensureNetwork makes the network once; concurrent callers share one try.
func (m *Manager) ensureNetwork(ctx context.Context) error {
	if m.net.ready.Load() {
		return nil
	}
	_, err, _ := m.net.make.Do("net", func() (any, error) {
		return nil, m.rt.Isolate(ctx, m.cfg.Network, runtime.Shared(m.cfg.Labels))
	})
	if err != nil {
		return fmt.Errorf("network %s: %w", m.cfg.Network, err)
	}
	m.net.ready.Store(true)
	return nil
}

// create creates and starts sb's container from tpl; errors are
// createStart's (runtime.ErrNameTaken if the name is in use).
func (m *Manager) create(ctx context.Context, sb *sandbox, tpl *config.Template, subject string, meta map[string]string) (string, error) {
	spec, err := m.spec(sb.id, tpl)
	if err != nil {
		return "", err
	}
	if err := CheckMetadata(meta); err != nil {
		return "", err
	}
	for k, v := range meta {
		spec.Labels[runtime.LabelMetaPrefix+k] = v
	}
	if subject != "" {
		spec.Labels[runtime.LabelSubject] = SubjectKey(subject)
	}
	return m.createStart(ctx, sb, spec)
}

// createStart creates and starts spec within the start limits and returns
// its ID ("" if none was made); sb, if not nil, shows the phases.
func (m *Manager) createStart(ctx context.Context, sb *sandbox, spec runtime.Spec) (string, error) {
	phase := func(p string) {
		if sb != nil {
			m.setPhase(sb, p, "")
		}
	}
	release, err := m.acquireStart(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	if err := m.ensureNetwork(ctx); err != nil {
		return "", err
	}
	phase(PhaseCreating)
	ctr, err := m.rt.Create(ctx, spec)
	if errors.Is(err, runtime.ErrNoNetwork) { // removed behind our back: make it again
		m.net.ready.Store(false)
		if err := m.ensureNetwork(ctx); err != nil {
			return "", err
		}
		ctr, err = m.rt.Create(ctx, spec)
	}
	if err != nil {
		return "", err
	}
	phase(PhaseStarting)
	if err := m.rt.Start(ctx, ctr); err != nil {
		return ctr, err
	}
	if sb != nil {
		m.markRunning(sb)
	}
	return ctr, nil
}

// spec resolves tpl into the container to create for id.
func (m *Manager) spec(id string, tpl *config.Template) (runtime.Spec, error) {
	if tpl.Image == "" {
		return runtime.Spec{}, fmt.Errorf("template %q has no image", tpl.Name)
	}
	port := tpl.Port
	if port <= 0 {
		port = 3000
	}
	labels := m.createLabels()
	labels[runtime.LabelSandbox] = id
	labels[runtime.LabelTemplate] = tpl.Name
	labels[runtime.LabelPort] = strconv.Itoa(port)
	env := make([]string, 0, len(tpl.Env))
	for k, v := range tpl.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return runtime.Spec{
		Name:      m.name(id),
		Image:     tpl.Image,
		Cmd:       tpl.Cmd,
		Env:       env,
		Labels:    labels,
		Network:   m.cfg.Network,
		Memory:    int64(tpl.Memory),
		CPUs:      tpl.CPUs,
		Pids:      tpl.Pids,
		CapAdd:    tpl.CapAdd,
		ReadOnly:  tpl.ReadOnly,
		Port:      port,
		ReadyPath: tpl.Ready.Path,
		Workspace: workspaceSpec(tpl.Workspace),
	}, nil
}

// acquireStart takes a running-capacity reservation and a start slot.
// The returned func gives both back; by then a started sandbox is counted
// as running through its state.
func (m *Manager) acquireStart(ctx context.Context) (release func(), err error) {
	unreserve, err := m.reserveRunning(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case m.starts.queued <- struct{}{}:
	default:
		unreserve()
		return nil, fmt.Errorf("%w: %d starts queued", ErrCapacity, cap(m.starts.queued))
	}
	// Queue time is capacity's, not the app's ready timeout's.
	if clock, _ := ctx.Value(readyClockKey{}).(*readyClock); clock != nil {
		clock.pause()
		defer clock.resume()
	}
	t := time.NewTimer(m.cfg.StartQueueTimeout)
	defer t.Stop()
	select {
	case m.starts.slots <- struct{}{}:
		<-m.starts.queued
	case <-t.C:
		<-m.starts.queued
		unreserve()
		return nil, fmt.Errorf("%w: no start slot within %s", ErrCapacity, m.cfg.StartQueueTimeout)
	case <-ctx.Done():
		<-m.starts.queued
		unreserve()
		return nil, fmt.Errorf("wait for a start slot: %w", context.Cause(ctx))
	}
	storeLater(&m.starts.peak, m.starts.inFlight.Add(1))
	return func() {
		m.starts.inFlight.Add(-1)
		<-m.starts.slots
		unreserve()
	}, nil
}

// reserveRunning counts one more running sandbox (a start, or a claim
// from the pool) against MaxRunning until unreserve; ErrCapacity if there
// is no room. Whoever makes it run marks its record running before
// calling unreserve, so it is counted all along.
func (m *Manager) reserveRunning(ctx context.Context) (unreserve func(), err error) {
	if !m.reserve() {
		// The count may be stale: ask the runtime once before refusing.
		if err := m.refreshStates(ctx); err != nil {
			return nil, err
		}
		if !m.reserve() {
			return nil, fmt.Errorf("%w: %d sandboxes running or starting", ErrCapacity, m.starts.maxRunning.Load())
		}
	}
	return func() {
		m.mu.Lock()
		m.reserved--
		m.mu.Unlock()
	}, nil
}

// reserve counts a start against MaxRunning if there is room.
func (m *Manager) reserve() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if int64(m.runningLocked()+m.reserved) >= m.starts.maxRunning.Load() {
		return false
	}
	m.reserved++
	return true
}

// runningLocked counts sandboxes holding resources. m.mu must be held.
func (m *Manager) runningLocked() int {
	n := 0
	for _, sb := range m.sandboxes {
		if sb.state == runtime.StateRunning || sb.state == runtime.StatePaused {
			n++
		}
	}
	return n
}

func (m *Manager) markRunning(sb *sandbox) {
	m.mu.Lock()
	m.seenLocked(sb) // newer than a list begun before (refreshStates)
	sb.state = runtime.StateRunning
	m.mu.Unlock()
}

func workspaceSpec(w *config.Workspace) *runtime.Workspace {
	if w == nil {
		return nil
	}
	return &runtime.Workspace{Size: int64(w.Size), Path: w.Path, StorageClass: w.StorageClass}
}
