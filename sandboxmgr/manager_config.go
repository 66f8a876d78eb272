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
	// Labels are added to every instance, network and image the manager
	// creates, and scope it (scope.go): an instance lacking any of them is
	// never acted on or proxied to (runtime.ErrForeign).
	Labels map[string]string
	// MaxConcurrentStarts caps creates/starts in flight (running sandboxes
	// never wait; unpausing takes no slot). Zero means config's default, as
	// for the limits below.
	MaxConcurrentStarts int
	// StartQueue caps wakes waiting for a slot; beyond it, ErrCapacity.
	StartQueue int
	// StartQueueTimeout bounds the wait for a start slot (ErrCapacity).
	StartQueueTimeout time.Duration
	// MaxRunning caps running sandboxes (as known to this manager).
	MaxRunning int
	// Templates resolves a template by name for background work. Nil: none.
	Templates func(name string) *config.Template
	// Observer, if set, is told about cold starts (metrics).
	Observer Observer
	// ListTemplates returns every template, for the warm pool. Nil: no pool.
	ListTemplates func() []*config.Template
	// PoolEvery is how often the pool is topped up. Zero means 1s.
	PoolEvery time.Duration
	// StaleCreate is how old a never-started instance must be for Start to
	// remove it as half-made (younger may be a replica's create in flight).
	// Zero means 2m; negative means any age.
	StaleCreate time.Duration
	// ReapEvery is how often the reaper runs. Zero means 1s; negative: never.
	ReapEvery time.Duration
	// RecheckEvery bounds how long a cached endpoint goes unconfirmed
	// (recheck.go). Zero means 5s; negative disables it (tests).
	RecheckEvery time.Duration
	// RecordName names the record that outlives a sandbox's instance for
	// every scope (Kubernetes: a ConfigMap, records.Name); a ForeignError
	// names it. Nil: records are kept per scope (a Docker data dir).
	RecordName func(id string) string
}

// DefaultRecheckEvery is Config.RecheckEvery's default, which the
// records' freshness bound (records.Options.RecheckEvery) must match.
const DefaultRecheckEvery = 5 * time.Second

// LongestWake is the longest a wake can take: its ready timeout plus a
// start-slot wait for each of create and start (records.Options.LongestWake).
func (c Config) LongestWake() time.Duration {
	longest := readyTimeout(nil)
	if c.ListTemplates != nil {
		for _, t := range c.ListTemplates() {
			longest = max(longest, readyTimeout(t))
		}
	}
	return longest + 2*c.StartQueueTimeout
}

// applyDefaults fills zero fields (see the package doc).
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
