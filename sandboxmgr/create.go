package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
	"slices"
	"strconv"
	"time"

	"github.com/previewgate/previewgate/config"
)

// Creating a container from a template, and the start slots and running
// count that bound how many start at once.

// create creates and starts sb's container from tpl within the start
// limits, and returns its ID ("" if none was made). errNameTaken if the
// name is already in use.
func (m *Manager) create(ctx context.Context, sb *sandbox, tpl *config.Template, subject string, meta map[string]string) (string, error) {
	spec, err := m.spec(sb.id, tpl)
	if err != nil {
		return "", err
	}
	if err := CheckMetadata(meta); err != nil {
		return "", err
	}
	for k, v := range meta {
		spec.Labels[LabelMetaPrefix+k] = v
	}
	if subject != "" {
		spec.Labels[LabelSubject] = SubjectKey(subject)
	}
	release, err := m.acquireStart(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	if err := m.ensureNetwork(ctx); err != nil {
		return "", err
	}
	m.setPhase(sb, PhaseCreating, "")
	ctr, err := m.eng.Create(ctx, spec)
	if errors.Is(err, runtime.ErrNoNetwork) { // removed behind our back: make it again
		m.mu.Lock()
		m.netReady = false
		m.mu.Unlock()
		if err := m.ensureNetwork(ctx); err != nil {
			return "", err
		}
		ctr, err = m.eng.Create(ctx, spec)
	}
	if err != nil {
		return "", err
	}
	m.setPhase(sb, PhaseStarting, "")
	if err := m.eng.Start(ctx, ctr); err != nil {
		return ctr, err
	}
	m.markRunning(sb)
	return ctr, nil
}

// spec resolves tpl into the container to create for id.
func (m *Manager) spec(id string, tpl *config.Template) (ctrSpec, error) {
	if tpl.Image == "" {
		return ctrSpec{}, fmt.Errorf("template %q has no image", tpl.Name)
	}
	port := tpl.Port
	if port <= 0 {
		port = 3000
	}
	labels := m.createLabels()
	labels[LabelSandbox] = id
	labels[LabelTemplate] = tpl.Name
	labels[LabelPort] = strconv.Itoa(port)
	env := make([]string, 0, len(tpl.Env))
	for k, v := range tpl.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return ctrSpec{
		Name:      ContainerName(id),
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
	if !m.reserve() {
		// The count may be stale (containers stopped behind our back):
		// ask Docker once before refusing.
		if err := m.refreshStates(ctx); err != nil {
			return nil, err
		}
		if !m.reserve() {
			return nil, fmt.Errorf("%w: %d sandboxes running or starting", ErrCapacity, m.maxRunning.Load())
		}
	}
	unreserve := func() {
		m.mu.Lock()
		m.reserved--
		m.mu.Unlock()
	}
	select {
	case m.queued <- struct{}{}:
	default:
		unreserve()
		return nil, fmt.Errorf("%w: %d starts queued", ErrCapacity, cap(m.queued))
	}
	// Time in the queue is capacity's, not the app's: it does not count
	// against the wake's ready timeout.
	if clock, _ := ctx.Value(readyClockKey{}).(*readyClock); clock != nil {
		clock.pause()
		defer clock.resume()
	}
	t := time.NewTimer(m.cfg.StartQueueTimeout)
	defer t.Stop()
	select {
	case m.slots <- struct{}{}:
		<-m.queued
	case <-t.C:
		<-m.queued
		unreserve()
		return nil, fmt.Errorf("%w: no start slot within %s", ErrCapacity, m.cfg.StartQueueTimeout)
	case <-ctx.Done():
		<-m.queued
		unreserve()
		return nil, fmt.Errorf("wait for a start slot: %w", context.Cause(ctx))
	}
	n := m.startsInFlight.Add(1)
	for {
		peak := m.peakStarts.Load()
		if n <= peak || m.peakStarts.CompareAndSwap(peak, n) {
			break
		}
	}
	return func() {
		m.startsInFlight.Add(-1)
		<-m.slots
		unreserve()
	}, nil
}

// reserve counts a start against MaxRunning if there is room.
func (m *Manager) reserve() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if int64(m.runningLocked()+m.reserved) >= m.maxRunning.Load() {
		return false
	}
	m.reserved++
	return true
}

// runningLocked counts sandboxes holding resources. m.mu must be held.
func (m *Manager) runningLocked() int {
	n := 0
	for _, sb := range m.sandboxes {
		if sb.state == stateRunning || sb.state == statePaused {
			n++
		}
	}
	return n
}

func (m *Manager) markRunning(sb *sandbox) {
	m.mu.Lock()
	sb.state = stateRunning
	m.mu.Unlock()
}

// workspaceSpec is a template's workspace in the runtime's words.
func workspaceSpec(w *config.Workspace) *runtime.Workspace {
	if w == nil {
		return nil
	}
	return &runtime.Workspace{Size: int64(w.Size), Path: w.Path, StorageClass: w.StorageClass}
}
