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

	"github.com/previewgate/previewgate/records"
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
	// runtime keeps them (package records): every replica says the same.
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
	recs           Records            // per-sandbox settings and removal marks (settings.go)
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
	var store records.Store
	switch cfg.Runtime {
	case "", RuntimeDocker:
		rt, err := docker.New(docker.Options{Host: cfg.Host, Network: cfg.Network, DialTimeout: cfg.DialTimeout, Replicas: cfg.Replicas})
		if err != nil {
			return nil, err
		}
		eng, store = rt, rt
	case RuntimeKubernetes:
		kc := cfg.Kubernetes
		if kc.Log == nil {
			kc.Log = log
		}
		rt, err := kube.New(kc, cfg.Labels)
		if err != nil {
			return nil, err
		}
		eng, store = rt, rt
	default:
		return nil, fmt.Errorf("unknown runtime %q (want docker or kubernetes)", cfg.Runtime)
	}
	cfg.applyDefaults()
	recs := records.New(store, records.Options{Labels: runtime.Scoped(cfg.Labels), RecheckEvery: cfg.RecheckEvery, LongestWake: cfg.LongestWake, Log: log})
	return newManager(cfg, eng, recs, log), nil
}

// Records are the per-sandbox records the manager keeps its removal marks
// in, for the gateway's and the admin API's settings and links.
func (m *Manager) Records() *records.Records {
	r, _ := m.recs.(*records.Records)
	return r
}

// The runtimes implement the manager's interface.
var (
	_ engine = (*docker.Runtime)(nil)
	_ engine = (*kube.Runtime)(nil)
)

func newManager(cfg Config, eng engine, recs Records, log *slog.Logger) *Manager {
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
		stamp:     runtime.Stamp(cfg.Labels),
		replicaID: randomHex(),
		recs:      recs,
	}
	if m.recs == nil {
		m.recs = records.New(nil, records.Options{}) // keeps none
	}
	m.maxRunning.Store(int64(cfg.MaxRunning))
	return m
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
