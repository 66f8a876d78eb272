package sandboxmgr

import (
	"time"

	"github.com/previewgate/previewgate/config"
)

// Config configures a Manager. Zero values work.
type Config struct {
	// Network names the sandboxes' network (Docker) or NetworkPolicy
	// (Kubernetes). Zero means config.DefaultNetwork.
	Network string
	// Labels are added to every container, network and image the manager
	// creates (tests use them to clean up). They also scope the manager:
	// a container lacking any of them (or previewgate.managed=true) is
	// never started, unpaused, stopped, removed, listed, reaped, adopted or
	// proxied to; Ensure on its name fails with runtime.ErrForeign.
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
	// RecordName names the record (settings, links) that outlives a
	// sandbox's instance and holds its id for every scope: Kubernetes
	// keeps it as a ConfigMap of that name (records.Name), which a
	// ForeignError then names beside the container. Nil: records are kept
	// per scope (a Docker gateway's data dir), in nobody else's way.
	RecordName func(id string) string
}

// DefaultRecheckEvery is Config.RecheckEvery's default, which the
// records' freshness bound (records.Options.RecheckEvery) must match.
const DefaultRecheckEvery = 5 * time.Second

// LongestWake is the longest a wake can take: its ready timeout, plus a
// wait for a start slot for each of its create and start. Removal marks
// outlive twice that (records.Options.LongestWake). c has its defaults.
func (c Config) LongestWake() time.Duration {
	longest := readyTimeout(nil)
	if c.ListTemplates != nil {
		for _, t := range c.ListTemplates() {
			longest = max(longest, readyTimeout(t))
		}
	}
	return longest + 2*c.StartQueueTimeout
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
		c.RecheckEvery = DefaultRecheckEvery
	}
	if c.Templates == nil {
		c.Templates = func(string) *config.Template { return nil }
	}
}
