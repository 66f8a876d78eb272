// Package sandboxmgr owns the sandbox record (#21) and the lifecycle:
// single-flight wake, readiness, idle reaper, warm pool, reconciliation.
// It talks to a runtime through runtime.Runtime, made by the serve wiring
// (sandboxmgr/docker, sandboxmgr/kube) and handed to New; what a runtime
// can do beyond it is declared in runtime.Capabilities, never found by
// type assertion. It imports no runtime's client. The runtime is the
// source of truth: the manager only caches, and rebuilds every record
// from the instances' own labels. Settings and share links are package
// records'.
//
// A wake is shared by all requests for a sandbox and bounded by the
// template's ready timeout; a caller giving up never cancels it. The hot
// path, Ensure for a sandbox known ready, reads an atomic pointer under a
// read lock and makes no runtime call. instance.go and recheck.go say what
// bounds a stale endpoint, confirm.go why no request reaches another's
// instance all the same (each new connection is confirmed by the runtime).
//
// Defaults: what a config file sets is defined in package config and read
// from there; the manager's own timers (PoolEvery, StaleCreate, ReapEvery,
// RecheckEvery) are defined in Config.applyDefaults and nowhere else.
package sandboxmgr

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Errors of the manager's own; a runtime's (runtime.ErrNotFound,
// ErrUnavailable, ErrNoImage, ErrForeign) come back as they are. The
// gateway maps them to statuses.
var (
	ErrNotReady  = errors.New("sandbox did not become ready") // 504
	ErrCapacity  = errors.New("at capacity")                  // 503
	ErrInvalidID = errors.New("invalid sandbox id")           // 400
	// ErrAsleep: the sandbox is stopped, paused or absent and the caller
	// asked not to wake it (Options.NoWake). 503 with Retry-After.
	ErrAsleep = errors.New("sandbox is asleep")
	// ErrMoved: the runtime, asked by Handle.Confirm, says an address no
	// longer belongs to the instance a connection was made for (it
	// stopped, restarted, or its address passed to another). 502 unless a
	// re-ensure finds the sandbox's instance of the moment.
	ErrMoved = errors.New("the runtime does not confirm the instance at this address")
)

// Endpoint is where a ready sandbox's app listens.
type Endpoint struct {
	ID       string
	Addr     string // "ip:port", dialable from the gateway
	Template string
	// Instance names the run behind Addr: "<container ID>@<start time in
	// unix ns>" (instance.go); Listener.InstanceGone says when it ends.
	Instance string
}

// Info describes a managed sandbox for the admin API.
type Info struct {
	ID           string
	Template     string
	State        string // running | paused | exited | created | ...
	Container    string
	LastActivity time.Time
	StartedAt    time.Time
	// LastFailure is the last failed start this replica saw (#24, 6).
	LastFailure *Failure
	// Metadata is what the sandbox was created with (instance labels).
	Metadata map[string]string
	// OpenSockets, Wakes and WakeSeconds are this replica's, since it
	// started.
	OpenSockets int
	Wakes       int64
	WakeSeconds float64
	// Awake says what keeps a running sandbox up (why.go); nil unless running.
	Awake *Awake
	// PublicSetting is its own public setting (#23), absent when its
	// template's applies; LiveLinks counts links neither expired nor revoked.
	PublicSetting *bool
	KeepUpUntil   time.Time
	LiveLinks     int
}

// Manager owns the sandboxes of its scope on one runtime: their records,
// and every wake, stop and removal of their instances.
//
// Lock order: sb.op, then m.mu, then the locks of the manager's parts
// (wakeTimes.mu, a wake's readyClock.mu) and of package records. sb.op is
// held across runtime calls (a wake, the reaper's stop or removal); m.mu
// never is, nor is any lock taken after it. A goroutine holding m.mu
// never waits for sb.op (the reaper only tries it).
type Manager struct {
	cfg      Config
	log      *slog.Logger
	rt       runtime.Runtime
	caps     runtime.Capabilities // what rt can do beyond runtime.Runtime
	recs     Records              // per-sandbox settings and removal marks (settings.go)
	now      func() time.Time
	born     time.Time                // when this manager was made: activity before it is unknown
	stamp    string                   // LabelScope of what it creates (scope.go)
	listener atomic.Pointer[Listener] // set by SetListener

	wakes  singleflight.Group // keyed by sandbox id
	starts starts             // start slots and the running cap (create.go)
	net    network            // the sandboxes' network, made once (create.go)
	trust  trust              // what says a cached endpoint may be used unchecked (recheck.go)
	loops  loops              // background work and wakes in flight (manager_start.go)

	mu        sync.RWMutex        // guards sandboxes, addrs, gen, pool, reserved, admits, closed
	sandboxes map[string]*sandbox // by id; entries live until Remove
	addrs     map[string]*sandbox // by IP: the record whose endpoint was last cached there (instance.go)
	gen       uint64              // sandbox.seen's clock
	pool      poolState
	reserved  int        // starts in flight, counted against MaxRunning
	admits    admissions // wakes in flight, counted against a subject's cap (admit.go)
	closed    bool
	wakeTimes wakeTimes // own lock; typical wake durations (failure.go)
}

// loops are the manager's goroutines: its background loops and the wakes
// in flight, all derived from ctx, which Close cancels before it waits.
type loops struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // wakes in flight
	bg     sync.WaitGroup // background loops (events, reaper, pool)
	once   sync.Once      // starts the background loops
}

// New returns the manager of the sandboxes rt runs, their settings and
// removal marks kept in recs (nil: none kept). It makes no runtime call:
// Start does. Close closes rt.
func New(cfg Config, rt runtime.Runtime, recs Records, log *slog.Logger) *Manager {
	cfg.applyDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if recs == nil {
		recs = records.New(nil, records.Options{}) // keeps none
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg:       cfg,
		log:       log,
		rt:        rt,
		caps:      rt.Capabilities(),
		recs:      recs,
		now:       time.Now,
		born:      time.Now(),
		stamp:     runtime.Stamp(cfg.Labels),
		loops:     loops{ctx: ctx, cancel: cancel},
		sandboxes: make(map[string]*sandbox),
		addrs:     make(map[string]*sandbox),
		pool:      newPoolState(),
	}
	m.starts.init(cfg)
	return m
}

// Ping reports whether the runtime answers (runtime.ErrUnavailable if not).
func (m *Manager) Ping(ctx context.Context) error { return m.rt.Ping(ctx) }
