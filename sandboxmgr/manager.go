// Package sandboxmgr owns the sandbox record (#21) — which instance, at
// which address, from which template, of which scope, in which state — and
// the lifecycle: single-flight wake, readiness, idle reaper, warm pool,
// reconciliation. It talks to a runtime through an interface of its own
// (engine.go: look up, create, start, resume, sleep, claim, remove,
// isolate, watch) implemented by one package per runtime:
// sandboxmgr/docker (the Docker Engine API) and sandboxmgr/kube (the
// Kubernetes API); what a runtime can do beyond it is declared in
// runtime.Capabilities, never found by type assertion. The runtime is the
// source of truth: the manager only caches, and rebuilds every record
// from the instances' own labels.
//
// A wake is shared by all requests for a sandbox (single-flight) and
// bounded by the template's ready timeout; a caller giving up never
// cancels it. The hot path, Ensure for a sandbox known ready, reads an
// atomic pointer under a read lock and makes no runtime call. A cached
// endpoint can go stale; instance.go and recheck.go say what bounds that
// and why no request of one sandbox reaches another's instance.
//
// Defaults (one definition each): what a config file sets (network,
// limits, a template's ready timeout, the Kubernetes namespace, gateway
// labels, run_as_user, activity_every) is defined in package config
// (config.ApplyDefaults and the Default* constants) and read from there;
// the manager's own timers, which no file sets (DialTimeout, PoolEvery,
// StaleCreate, ReapEvery, RecheckEvery), are defined in Config.applyDefaults
// and nowhere else.
package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Errors returned by the manager. The gateway maps them to statuses.
var (
	ErrUnavailable = runtime.ErrUnavailable                     // 503
	ErrNotReady    = errors.New("sandbox did not become ready") // 504
	ErrCapacity    = errors.New("at capacity")                  // 503
	ErrNoContainer = runtime.ErrNotFound                        // 404 on admin calls
	ErrNoImage     = runtime.ErrNoImage                         // 500: a template names an image that is not there
	ErrInvalidID   = errors.New("invalid sandbox id")           // 400
	// ErrAsleep: the sandbox is stopped, paused or absent and the caller
	// asked not to wake it (Options.NoWake). 503 with Retry-After.
	ErrAsleep = errors.New("sandbox is asleep")
	// ErrForeignContainer: a container has the sandbox's name but lacks
	// this manager's scope labels (another gateway's, or nobody's). The
	// manager leaves it alone. 409.
	ErrForeignContainer = runtime.ErrForeign
)

// Labels on every managed instance (package runtime says what each means).
const (
	LabelManaged  = runtime.LabelManaged
	LabelSandbox  = runtime.LabelSandbox
	LabelTemplate = runtime.LabelTemplate
	LabelPort     = runtime.LabelPort
	LabelPool     = runtime.LabelPool
	LabelInstance = runtime.LabelInstance
	LabelScope    = runtime.LabelScope
	LabelSubject  = runtime.LabelSubject
	// LabelMetaPrefix prefixes a sandbox's metadata labels (metadata.go).
	LabelMetaPrefix = runtime.LabelMetaPrefix
)

// ContainerName is the name of sandbox id's container or pod. The name is
// unique in a runtime, which makes it the lock between racing creators.
func ContainerName(id string) string { return runtime.ContainerName(id) }

// Config configures a Manager. Zero values work.
type Config struct {
	Host    string // Docker host. Zero means DOCKER_HOST or the default socket.
	Network string // bridge network for sandboxes. Zero means config.DefaultNetwork.
	// Runtime is "docker" (zero) or "kubernetes" (then Kubernetes applies
	// and Host does not; Network names the sandboxes' NetworkPolicy).
	Runtime    string
	Kubernetes KubeConfig
	// Labels are added to every container, network and image the manager
	// creates (tests use them to clean up). They also scope the manager:
	// a container lacking any of them (or previewgate.managed=true) is
	// never started, unpaused, stopped, removed, listed, reaped, adopted or
	// proxied to; Ensure on its name fails with ErrForeignContainer.
	Labels map[string]string
	// MaxConcurrentStarts caps creates/starts in flight. Zero means
	// config's default (limits.max_concurrent_starts), as for the limits
	// below.
	// Running sandboxes never wait for it; unpausing does not take a slot.
	MaxConcurrentStarts int
	// StartQueue caps wakes waiting for a start slot; beyond it Ensure fails
	// with ErrCapacity at once.
	StartQueue int
	// StartQueueTimeout bounds the wait for a start slot (ErrCapacity).
	StartQueueTimeout time.Duration
	// MaxRunning caps running sandboxes (as known to this manager).
	MaxRunning int
	// DialTimeout bounds connecting to the Docker engine, so a dead engine is
	// reported quickly. Zero means 1s.
	DialTimeout time.Duration
	// Templates resolves a template by name for background work (reaper, pool).
	// Nil means none.
	Templates func(name string) *config.Template
	// Observer, if set, is told about cold starts (metrics).
	Observer Observer
	// ListTemplates returns every configured template, for the warm pool
	// (templates with Pool > 0). Nil means no pool.
	ListTemplates func() []*config.Template
	// PoolEvery is how often the pool is topped up (an answered claim also triggers a
	// refill at once). Zero means 1s.
	PoolEvery time.Duration
	// StaleCreate is how old a container still in state "created" (never
	// started) must be for Start to remove it as left half-made by a crash
	// mid-create. Younger ones may be a racing replica's create in flight.
	// Zero means 2m; negative means any age.
	StaleCreate time.Duration
	// ReapEvery is how often the idle reaper looks at every sandbox. Zero
	// means 1s; negative disables the reaper.
	ReapEvery time.Duration
	// RecheckEvery bounds how long a cached endpoint goes unconfirmed by
	// the runtime's list, whatever the events stream's health
	// (recheck.go). Zero means 5s; negative disables it (tests).
	RecheckEvery time.Duration
	// Replicas is how many gateway replicas serve the Docker engine's
	// sandboxes (docker.replicas). Above 1, an idle stop first reads the
	// container's network counters (shared.go). Zero means 1. Kubernetes
	// replicas always share activity through the Leases.
	Replicas int
}

// applyDefaults fills zero fields. Those a config file sets come from
// config's one definition (config.DefaultLimits, DefaultNetwork); the
// manager's own timers, which no file sets, are defined here only.
func (c *Config) applyDefaults() {
	lim := config.DefaultLimits()
	if c.Network == "" {
		c.Network = config.DefaultNetwork
	}
	if c.MaxConcurrentStarts <= 0 {
		c.MaxConcurrentStarts = lim.MaxConcurrentStarts
	}
	if c.StartQueue <= 0 {
		c.StartQueue = lim.StartQueue
	}
	if c.StartQueueTimeout <= 0 {
		c.StartQueueTimeout = lim.StartQueueTimeout.D()
	}
	if c.MaxRunning <= 0 {
		c.MaxRunning = lim.MaxRunning
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = time.Second
	}
	if c.PoolEvery <= 0 {
		c.PoolEvery = time.Second
	}
	if c.StaleCreate == 0 {
		c.StaleCreate = 2 * time.Minute
	}
	if c.ReapEvery == 0 {
		c.ReapEvery = time.Second
	}
	if c.RecheckEvery == 0 {
		c.RecheckEvery = 5 * time.Second
	}
	if c.Templates == nil {
		c.Templates = func(string) *config.Template { return nil }
	}
}

// Endpoint is where a ready sandbox's app listens.
type Endpoint struct {
	ID       string
	Addr     string // "ip:port", dialable from the gateway
	Template string
	// Instance names the run of the container behind Addr:
	// "<container ID>@<start time in unix nanoseconds>". A restart of the
	// same container (same ID, maybe the same address) is another instance,
	// and so is another container that inherits the address. Upstream
	// connections belong to one instance; Listener.InstanceGone says when
	// it ends.
	Instance string
}

// Info describes a managed sandbox for the admin API.
type Info struct {
	ID           string    `json:"id"`
	Template     string    `json:"template"`
	State        string    `json:"state"` // running | paused | exited | created | ...
	Container    string    `json:"container"`
	LastActivity time.Time `json:"last_activity,omitzero"`
	StartedAt    time.Time `json:"started_at,omitzero"`
	// LastFailure is the sandbox's last failed start as this replica saw
	// it (#24, 6); nil if it saw none.
	LastFailure *Failure `json:"last_failure,omitempty"`
	// Metadata is what the sandbox was created with (its instance's
	// labels): every replica and a restarted gateway see the same.
	Metadata map[string]string `json:"metadata,omitempty"`
	// OpenSockets, Wakes and WakeSeconds are this replica's: its open
	// WebSockets and SSE streams, and the wakes it made (their total
	// time), since it started.
	OpenSockets int     `json:"open_sockets"`
	Wakes       int64   `json:"wakes"`
	WakeSeconds float64 `json:"wake_seconds"`
	// Awake says what keeps a running sandbox up and when the idle reaper
	// will stop it (why.go); nil unless running.
	Awake *Awake `json:"awake,omitempty"`
	// PublicSetting is its own public setting (#23), absent when its
	// template's applies; KeepUpUntil its keep-up; LiveLinks how many of
	// its share links open it now (neither expired nor revoked). As the
	// runtime keeps them (settings.go): every replica says the same.
	PublicSetting *bool     `json:"public_setting,omitempty"`
	KeepUpUntil   time.Time `json:"keep_up_until,omitzero"`
	LiveLinks     int       `json:"live_links"`
}

// Manager owns the managed containers.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	eng   engine
	now   func() time.Time
	born  time.Time // when this manager was made: activity before it is unknown
	stamp string    // LabelScope of what it creates (scope.go)
	gen   uint64    // guarded by mu: sandbox.seen's clock
	// replicaID names this manager among the replicas (runtime.Locks).
	replicaID string
	stop      func() error             // closes the runtime's client
	caps      runtime.Capabilities     // what the runtime can do beyond engine
	listener  atomic.Pointer[Listener] // set by SetListener

	wakes   singleflight.Group // keyed by sandbox id
	netWake singleflight.Group // one network create at a time
	slots   chan struct{}      // start/create slots (MaxConcurrentStarts)
	// startsInFlight counts held start slots; peakStarts is its maximum.
	startsInFlight, peakStarts atomic.Int64
	maxRunning                 atomic.Int64  // Config.MaxRunning, changeable live
	queued                     chan struct{} // waiting for a slot (StartQueue)

	ctx    context.Context // canceled by Close; wakes derive from it
	cancel context.CancelFunc
	wg     sync.WaitGroup // wakes in flight
	bg     sync.WaitGroup // background loops (events, reaper, pool)
	bgOnce sync.Once      // starts the background loops

	mu        sync.RWMutex        // guards sandboxes, addrs, reserved, closed, netReady, pool
	sandboxes map[string]*sandbox // by id; entries live until Remove
	addrs     map[string]*sandbox // by IP: the record whose endpoint was last cached there (instance.go)
	pool      poolState
	wakeTimes wakeTimes // own lock; typical wake durations (failure.go)
	reserved  int       // starts in flight, counted against MaxRunning
	closed    bool
	netReady  bool // the managed network is known to exist

	// eventsDown: the events stream broke and no resync has followed since.
	// No event would tell of a cached endpoint's container ending, and its
	// address may pass to another sandbox's container, so Ensure checks a
	// cached endpoint with the engine before using it (stillServes).
	eventsDown atomic.Bool
	// watchBroken: when (unix ns) the Kubernetes watch last reported an
	// error; 0 once a re-check after it succeeded (recheck.go).
	watchBroken atomic.Int64
	// recheckFailing: the last re-check failed (logged once, recheck.go).
	recheckFailing atomic.Bool
	checks         singleflight.Group // stillServes inspects, one per sandbox at a time
	recs           recordCache        // per-sandbox settings and links (settings.go)
}

// errPulls: the runtime pulls its images (Kubernetes); it builds none.
var errPulls = errors.New("this runtime pulls its images from a registry and cannot build one; push the image where the cluster pulls from")

// Runtimes.
const (
	RuntimeDocker     = "docker"
	RuntimeKubernetes = "kubernetes"
)

// KubeConfig configures the Kubernetes runtime (package kube).
type KubeConfig = kube.Config

// New connects to the runtime (lazily; it does not fail when the Docker
// engine or the API server is down).
func New(cfg Config, log *slog.Logger) (*Manager, error) {
	cfg.applyDefaults()
	var eng engine
	switch cfg.Runtime {
	case "", RuntimeDocker:
		rt, err := docker.New(docker.Options{Host: cfg.Host, Network: cfg.Network, DialTimeout: cfg.DialTimeout, Replicas: cfg.Replicas})
		if err != nil {
			return nil, err
		}
		eng = rt
	case RuntimeKubernetes:
		kc := cfg.Kubernetes
		if kc.Log == nil {
			kc.Log = log
		}
		rt, err := kube.New(kc, cfg.Labels)
		if err != nil {
			return nil, err
		}
		eng = rt
	default:
		return nil, fmt.Errorf("unknown runtime %q (want docker or kubernetes)", cfg.Runtime)
	}
	return newManager(cfg, log, eng), nil
}

// The runtimes implement the manager's interface.
var (
	_ engine = (*docker.Runtime)(nil)
	_ engine = (*kube.Runtime)(nil)
)

func newManager(cfg Config, log *slog.Logger, eng engine) *Manager {
	cfg.applyDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg:       cfg,
		log:       log,
		eng:       eng,
		now:       time.Now,
		stop:      eng.Close,
		caps:      eng.Capabilities(),
		slots:     make(chan struct{}, cfg.MaxConcurrentStarts),
		queued:    make(chan struct{}, cfg.StartQueue),
		ctx:       ctx,
		cancel:    cancel,
		sandboxes: make(map[string]*sandbox),
		addrs:     make(map[string]*sandbox),
		pool:      newPoolState(),
		born:      time.Now(),
		stamp:     scopeStamp(cfg.Labels),
		replicaID: randomHex(),
	}
	m.maxRunning.Store(int64(cfg.MaxRunning))
	return m
}

// Start reconciles with Docker (adopts managed containers, ensures the
// network) and starts background work. It returns ErrUnavailable if Docker
// cannot be reached; the caller may still serve and retry.
//
// Background work (the events stream, ...) starts on the first call even if
// Docker is down, and keeps retrying; Close stops it.
func (m *Manager) Start(ctx context.Context) error {
	m.bgOnce.Do(m.startBackground)
	if err := m.ensureNetwork(ctx); err != nil {
		return err
	}
	// Settings and links before the first request: a restart keeps a
	// revoked link revoked and a private toggle private (settings.go).
	if _, err := m.reloadRecords(ctx, time.Time{}); err != nil {
		return err
	}
	list, err := m.listOwned(ctx)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(list))
	removed := 0
	for _, c := range list {
		if m.halfMade(c) {
			// A gateway killed between create and start left it; the next
			// request makes a whole one.
			if err := m.eng.Remove(ctx, c.ID); err != nil && !errors.Is(err, ErrNoContainer) {
				m.log.WarnContext(ctx, "remove half-made container", "container", c.Name, "err", err)
			} else {
				removed++
			}
			continue
		}
		id, ok := idFromName(c.Name, c.Labels[LabelPool])
		if !ok {
			if c.Labels[LabelPool] != "" {
				m.adoptPool(ctx, c)
			}
			continue
		}
		seen[id] = true
		if c.State == stateRunning && c.StartedAt.IsZero() {
			// Docker's list has no start time; running ones are worth one
			// inspect (the reaper needs it). A failure here is not fatal.
			// Kubernetes lists whole pods: no call per sandbox.
			if full, err := m.inspectOwned(ctx, c.ID); err == nil {
				c = full
			}
		}
		m.observe(id, c)
	}
	var gone []string
	m.mu.Lock()
	for id, sb := range m.sandboxes {
		if !seen[id] {
			gone = append(gone, m.dropLocked(sb))
			sb.last = nil
			sb.state = ""
		}
	}
	m.mu.Unlock()
	m.gone(gone...)
	m.log.InfoContext(ctx, "sandboxes adopted", "count", len(seen), "half_made_removed", removed)
	return nil
}

// halfMade reports a container created but never started, older than
// Config.StaleCreate.
func (m *Manager) halfMade(c ctrInfo) bool {
	if c.State != stateCreated {
		return false
	}
	return m.cfg.StaleCreate < 0 || (!c.Created.IsZero() && m.now().Sub(c.Created) >= m.cfg.StaleCreate)
}

// startBackground starts the loops Close waits for.
func (m *Manager) startBackground() {
	m.mu.RLock()
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return
	}
	m.bg.Go(func() { m.watchEvents(m.ctx) })
	if a := m.caps.Activity; a != nil && a.RecordEvery() > 0 {
		m.bg.Go(func() { m.flushLoop(m.ctx, a) })
	}
	if m.cfg.ReapEvery > 0 {
		m.bg.Go(func() { m.reapLoop(m.ctx) })
	}
	if m.cfg.RecheckEvery > 0 {
		m.bg.Go(func() { m.recheckLoop(m.ctx) })
	}
	if m.cfg.ListTemplates != nil {
		m.bg.Go(func() { m.poolLoop(m.ctx) })
	}
}

// Close stops background work and waits for it. Wakes in flight are
// canceled. Containers keep running.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.bgOnce.Do(func() {}) // no background work starts after this
	m.wg.Wait()
	m.bg.Wait()
	return m.stop()
}

// Forget drops the cached endpoint of id (e.g. after a dial to addr failed),
// so the next Ensure checks Docker again, and reports its instance to
// Listener.InstanceGone. An endpoint that no longer points at addr (already
// replaced by a newer wake, which reported the old instance) is kept.
func (m *Manager) Forget(id, addr string) {
	var gone string
	m.mu.Lock()
	if sb := m.sandboxes[id]; sb != nil && sb.last != nil && sb.last.Addr == addr {
		gone = m.dropLocked(sb)
	}
	m.mu.Unlock()
	m.gone(gone)
}

// Cached returns id's endpoint if the manager knows it as running and
// ready, without any Docker call. (While the events stream is down, Ensure
// checks it before use; Cached is for decisions, not for dialing.)
func (m *Manager) Cached(id string) (Endpoint, bool) {
	if sb := m.lookup(id); sb != nil {
		if ep := sb.ep.Load(); ep != nil {
			return *ep, true
		}
	}
	return Endpoint{}, false
}

// Ping reports whether Docker is reachable (ErrUnavailable if not).
func (m *Manager) Ping(ctx context.Context) error { return m.eng.Ping(ctx) }

// BuildImage builds image tag from a tar build context (with a Dockerfile at
// its root), labelled with cfg.Labels. It reads the build output to its end
// and returns the build's own error if a step failed.
func (m *Manager) BuildImage(ctx context.Context, tag string, buildContext []byte) error {
	if m.caps.Images == nil {
		return fmt.Errorf("build %s: %w", tag, errPulls)
	}
	return m.caps.Images.Build(ctx, tag, buildContext, m.sharedLabels())
}

// HasImage reports whether image tag exists locally.
func (m *Manager) HasImage(ctx context.Context, tag string) (bool, error) {
	if m.caps.Images == nil {
		return true, nil // the runtime pulls: a missing image shows at start
	}
	return m.caps.Images.Has(ctx, tag)
}

// ensureNetwork creates the managed network once per manager; concurrent
// callers share one attempt.
func (m *Manager) ensureNetwork(ctx context.Context) error {
	m.mu.RLock()
	ok := m.netReady
	m.mu.RUnlock()
	if ok {
		return nil
	}
	_, err, _ := m.netWake.Do("net", func() (any, error) {
		return nil, m.eng.Isolate(ctx, m.cfg.Network, m.sharedLabels())
	})
	if err != nil {
		return fmt.Errorf("network %s: %w", m.cfg.Network, err)
	}
	m.mu.Lock()
	m.netReady = true
	m.mu.Unlock()
	return nil
}
