package sandboxmgr

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The warm pool (#7): per template with pool > 0, that many ready
// containers bound to no id, named previewgate-pool-<template>-<random> and
// labelled previewgate.pool=<template>. A wake that would create a sandbox
// claims one by renaming it to previewgate-<id>. The name is the binding
// (labels cannot change after create), so a claim survives a restart.
// Refills run in the background within the start cap; a ready pool
// container is not counted against MaxRunning, a claimed one is, from the
// claim on (a claim with no room is refused, like a start).
//
// Where claims are atomic across replicas (Capabilities.SharedPool:
// Kubernetes) there is one pool per deployment (#26): every replica's view
// is the runtime's, any replica claims, and only the holder of the "pool"
// lock fills. A Docker engine has one gateway per scope, whose pool is the
// containers it made (a rename could take over a container just claimed).
//
// Pool containers made from a template since changed (LabelPoolSpec) are
// removed when met instead of claimed; a lowered pool size leaves the
// extra ones until claimed or the next restart.

// poolPrefix is the name prefix of template's unclaimed pool containers.
func poolPrefix(template string) string { return "previewgate-pool-" + template + "-" }

// poolCtr is one ready, unclaimed pool container.
type poolCtr struct {
	id    string // container ID: calls use it, never the name (scope.go)
	name  string
	image string // "" when unknown (adopted): taken as matching
	spec  string // LabelPoolSpec: the digest of what it was made from
	added time.Time
}

// poolState is guarded by Manager.mu.
type poolState struct {
	ready    map[string][]poolCtr // by template name
	filling  map[string]int       // refills in flight, by template
	failedAt map[string]time.Time // last failed refill, by template
	kick     chan struct{}        // wakes the pool loop (cap 1)
	replica  string               // names this manager among the replicas (runtime.Locks); set once
}

func newPoolState() poolState {
	return poolState{
		ready:    make(map[string][]poolCtr),
		filling:  make(map[string]int),
		failedAt: make(map[string]time.Time),
		kick:     make(chan struct{}, 1),
		replica:  randomHex(),
	}
}

// poolRetry spaces refills after a failed one (no create/remove loop).
const poolRetry = 10 * time.Second

// errNoPool: no ready pool container for the template.
var errNoPool = errors.New("no pool container")

// PoolSize reports how many ready, unclaimed containers template has.
func (m *Manager) PoolSize(template string) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.pool.ready[template])
}

func (m *Manager) kickPool() {
	select {
	case m.pool.kick <- struct{}{}:
	default:
	}
}

// poolLoop tops up the pools every PoolEvery and after each claim.
func (m *Manager) poolLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.PoolEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.pool.kick:
		}
		m.fillPools(ctx)
	}
}

// fillPools starts the refills each template needs, if this replica is
// the one that fills.
func (m *Manager) fillPools(ctx context.Context) {
	tpls := slices.DeleteFunc(slices.Clone(m.cfg.ListTemplates()), func(t *config.Template) bool { return t == nil || t.Pool <= 0 })
	if len(tpls) == 0 || !m.fillsPool(ctx) {
		return // no pool: no lock to take either
	}
	now := m.now()
	for _, tpl := range tpls {
		if tpl.Image == "" || tpl.Workspace != nil {
			continue // a pool pod could not mount the workspace of the sandbox it will serve
		}
		m.mu.Lock()
		need := tpl.Pool - len(m.pool.ready[tpl.Name]) - m.pool.filling[tpl.Name]
		if t := m.pool.failedAt[tpl.Name]; !t.IsZero() && now.Sub(t) < poolRetry {
			need = 0
		}
		if need > 0 {
			m.pool.filling[tpl.Name] += need
		}
		m.mu.Unlock()
		for range need {
			m.loops.bg.Go(func() { m.fillOne(ctx, tpl) })
		}
	}
}

// poolLockTTL: a filler that stopped renewing its lock is replaced after this.
const poolLockTTL = 10 * time.Second

// fillsPool reports whether this replica fills the pools: always without
// runtime Locks, else while it holds the "pool" lock.
func (m *Manager) fillsPool(ctx context.Context) bool {
	if m.caps.Locks == nil {
		return true
	}
	lctx, cancel := context.WithTimeout(ctx, poolLockTTL/2)
	defer cancel()
	held, err := m.caps.Locks.Hold(lctx, "pool", m.pool.replica, poolLockTTL)
	if err != nil && ctx.Err() == nil {
		m.log.DebugContext(ctx, "pool lock", "err", err)
	}
	return held
}

// syncPoolLocked makes the pool view the runtime's: the running, unclaimed
// pool instances in list (owned; from a re-check that began at listed).
// An entry added after listed (a refill that finished meanwhile) stays.
// m.mu must be held.
func (m *Manager) syncPoolLocked(list []runtime.Instance, listed time.Time) {
	seen := make(map[string]map[string]bool)
	for _, c := range list {
		tpl := c.Labels[runtime.LabelPool]
		if tpl == "" || c.State != runtime.StateRunning || !strings.HasPrefix(c.Name, poolPrefix(tpl)) {
			continue
		}
		if seen[tpl] == nil {
			seen[tpl] = make(map[string]bool)
		}
		seen[tpl][c.ID] = true
		m.addPoolLocked(tpl, poolCtr{id: c.ID, name: c.Name, image: c.Image, spec: c.Labels[runtime.LabelPoolSpec], added: listed})
	}
	for tpl, list := range m.pool.ready {
		m.pool.ready[tpl] = slices.DeleteFunc(list, func(pc poolCtr) bool { return !seen[tpl][pc.id] && pc.added.Before(listed) })
	}
}

// addPoolLocked adds pc to template's pool unless it is there already.
// m.mu must be held.
func (m *Manager) addPoolLocked(template string, pc poolCtr) {
	if !slices.ContainsFunc(m.pool.ready[template], func(x poolCtr) bool { return x.id == pc.id }) {
		m.pool.ready[template] = append(m.pool.ready[template], pc)
	}
}

// dropPoolLocked forgets pool instance id (claimed or ended, as an event
// says). m.mu must be held.
func (m *Manager) dropPoolLocked(id string) {
	for tpl, list := range m.pool.ready {
		m.pool.ready[tpl] = slices.DeleteFunc(list, func(pc poolCtr) bool { return pc.id == id })
	}
}

func (m *Manager) fillOne(ctx context.Context, tpl *config.Template) {
	ok := false
	defer func() {
		m.mu.Lock()
		m.pool.filling[tpl.Name]--
		if !ok && ctx.Err() == nil {
			m.pool.failedAt[tpl.Name] = m.now()
		}
		m.mu.Unlock()
	}()
	spec, err := m.spec("pool", tpl)
	if err != nil {
		return
	}
	spec.Name = poolPrefix(tpl.Name) + randomHex()
	delete(spec.Labels, runtime.LabelSandbox)
	spec.Labels[runtime.LabelPool] = tpl.Name
	spec.Labels[runtime.LabelPoolSpec] = poolSpec(spec)
	log := m.log.With("pool", tpl.Name, "container", spec.Name)
	ctx, cancel := context.WithTimeout(ctx, readyTimeout(tpl))
	defer cancel()
	c, err := m.createPool(ctx, spec)
	if err == nil {
		err = waitReady(ctx, endpointAddr(c, tpl.Port), tpl.Ready.Path, nil)
	}
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			log.WarnContext(ctx, "pool refill failed", "err", err)
			if c.ID != "" { // what this refill created, nothing else
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				_ = m.rt.Remove(rctx, c.ID)
				rcancel()
			}
		}
		return // on Close the half-made one is left to the next Start
	}
	m.mu.Lock()
	m.addPoolLocked(tpl.Name, poolCtr{id: c.ID, name: spec.Name, image: tpl.Image, spec: spec.Labels[runtime.LabelPoolSpec], added: m.now()})
	m.mu.Unlock()
	ok = true
	log.DebugContext(ctx, "pool container ready")
}

// createPool creates and starts spec within the start cap and returns it
// inspected. Once created, the result carries its ID even on error.
func (m *Manager) createPool(ctx context.Context, spec runtime.Spec) (runtime.Instance, error) {
	id, err := m.createStart(ctx, nil, spec)
	if err != nil {
		return runtime.Instance{ID: id}, err
	}
	c, err := m.rt.Lookup(ctx, id)

	c.ID = id
	if err == nil && c.IP == "" {
		err = fmt.Errorf("pool container %s has no address on network %s", spec.Name, m.cfg.Network)
	}
	return c, err
}

// claim binds a ready pool container of tpl to id and returns its ID.
// errNoPool if there is none; runtime.ErrNameTaken if the name was taken
// meanwhile (the pool container goes back).
func (m *Manager) claim(ctx context.Context, id string, tpl *config.Template) (string, error) {
	spec, err := m.spec(id, tpl)
	if err != nil {
		return "", err
	}
	want := poolSpec(spec)
	relisted := false
	for {
		pc, ok := m.takePool(tpl.Name)
		if !ok && m.caps.SharedPool && !relisted {
			// Claims of other replicas may have used up this replica's
			// view while pool instances remain: look once more.
			relisted = true
			if err := m.relistPool(ctx); err == nil {
				continue
			}
		}
		if !ok {
			return "", errNoPool
		}
		if pc.image != "" && pc.image != tpl.Image || pc.spec != want {
			m.discardPool(pc) // made from an older template (hostile5)
			continue
		}
		err := m.rt.Claim(ctx, pc.id, m.name(id))
		switch {
		case err == nil:
			return pc.id, nil // the caller refills the pool once the claim is answered
		case errors.Is(err, runtime.ErrNameTaken):
			m.mu.Lock()
			m.addPoolLocked(tpl.Name, pc)
			m.mu.Unlock()
			return "", err
		case errors.Is(err, runtime.ErrNotFound):
			continue // removed behind our back
		default:
			return "", err
		}
	}
}

// takePool takes one of template's pool instances out of the view: a
// random one, so that replicas sharing one view seldom reach for the same.
func (m *Manager) takePool(template string) (poolCtr, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.pool.ready[template]
	if len(list) == 0 {
		return poolCtr{}, false
	}
	i := mrand.IntN(len(list))
	pc := list[i]
	m.pool.ready[template] = slices.Delete(list, i, i+1)
	return pc, true
}

// relistPool makes the pool view the runtime's list of now.
func (m *Manager) relistPool(ctx context.Context) error {
	began := m.now()
	list, err := m.listOwned(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.syncPoolLocked(list, began)
	m.mu.Unlock()
	return nil
}

// discardPool removes a pool container in the background.
func (m *Manager) discardPool(pc poolCtr) {
	m.mu.RLock()
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return
	}
	m.loops.bg.Go(func() {
		ctx, cancel := context.WithTimeout(m.loops.ctx, 30*time.Second)
		defer cancel()
		if err := m.rt.Remove(ctx, pc.id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			m.log.WarnContext(ctx, "remove stale pool container", "container", pc.name, "err", err)
		}
	})
}

// adoptPool takes an owned, unclaimed pool container found at Start back
// into the pool if it runs, else removes it.
func (m *Manager) adoptPool(ctx context.Context, c runtime.Instance) {
	tpl := c.Labels[runtime.LabelPool]
	if c.State != runtime.StateRunning {
		if err := m.rt.Remove(ctx, c.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			m.log.WarnContext(ctx, "remove stopped pool container", "container", c.Name, "err", err)
		}
		return
	}
	m.mu.Lock()
	m.addPoolLocked(tpl, poolCtr{id: c.ID, name: c.Name, image: c.Image, spec: c.Labels[runtime.LabelPoolSpec], added: m.now()})
	m.mu.Unlock()
}

func randomHex() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// poolSpec is LabelPoolSpec for an instance made from s: a digest of all
// but its name and labels, a valid label value on every runtime.
func poolSpec(s runtime.Spec) string {
	s.Name, s.Labels = "", nil
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return "p" + hex.EncodeToString(sum[:])[:15]
}
