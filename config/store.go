package config

import (
	"reflect"
	"slices"
	"sync/atomic"
)

// Store holds the live config. Readers call Load once per unit of work
// (one atomic load) and keep that *Config; writers replace it whole.
type Store struct {
	p atomic.Pointer[Config]
}

// NewStore returns a Store holding c.
func NewStore(c *Config) *Store {
	s := &Store{}
	s.p.Store(c)
	return s
}

// Load returns the current config. It must not be modified.
func (s *Store) Load() *Config { return s.p.Load() }

// Store makes c the current config.
func (s *Store) Store(c *Config) { s.p.Store(c) }

// Swap makes c the current config and returns the previous one.
func (s *Store) Swap(c *Config) *Config { return s.p.Swap(c) }

// restartOnly lists the settings a running gateway cannot change: their
// listeners, state, Docker client and certificate manager are built once at
// start.
var restartOnly = []setting{
	{"listen.http", func(c *Config) any { return &c.Listen.HTTP }},
	{"listen.https", func(c *Config) any { return &c.Listen.HTTPS }},
	{"listen.admin", func(c *Config) any { return &c.Listen.Admin }},
	{"listen.metrics", func(c *Config) any { return &c.Listen.Metrics }},
	{"data_dir", func(c *Config) any { return &c.DataDir }},
	{"docker.host", func(c *Config) any { return &c.Docker.Host }},
	{"docker.network", func(c *Config) any { return &c.Docker.Network }},
	{"docker.replicas", func(c *Config) any { return &c.Docker.Replicas }},
	// The sandbox manager's engine (Docker client or Kubernetes clientset).
	{"runtime", func(c *Config) any { return &c.Runtime }},
	{"tls.mode", func(c *Config) any { return &c.TLS.Mode }},
	{"tls.acme", func(c *Config) any { return &c.TLS.ACME }},
	{"tls.cert_file", func(c *Config) any { return &c.TLS.CertFile }},
	{"tls.key_file", func(c *Config) any { return &c.TLS.KeyFile }},
	{"log.level", func(c *Config) any { return &c.Log.Level }},
	{"log.format", func(c *Config) any { return &c.Log.Format }},
	// The sandbox manager and the listeners take these when they start.
	{"limits.max_concurrent_starts", func(c *Config) any { return &c.Limits.MaxConcurrentStarts }},
	{"limits.start_queue", func(c *Config) any { return &c.Limits.StartQueue }},
	{"limits.start_queue_timeout", func(c *Config) any { return &c.Limits.StartQueueTimeout }},
	{"limits.max_header_bytes", func(c *Config) any { return &c.Limits.MaxHeaderBytes }},
	{"limits.read_header_timeout", func(c *Config) any { return &c.Limits.ReadHeaderTimeout }},
	{"limits.idle_timeout", func(c *Config) any { return &c.Limits.IdleConnTimeout }},
	{"limits.body_timeout", func(c *Config) any { return &c.Limits.BodyTimeout }},
	{"limits.body_min_rate", func(c *Config) any { return &c.Limits.BodyMinRate }},
	{"limits.write_timeout", func(c *Config) any { return &c.Limits.WriteTimeout }},
	{"limits.connections_per_ip", func(c *Config) any { return &c.Limits.ConnectionsPerIP }},
	{"limits.max_connections", func(c *Config) any { return &c.Limits.MaxConnections }},
}

// setting names a config key (as written in the file) and points at it.
type setting struct {
	name string
	get  func(*Config) any
}

// domainSetting is restart-only where certificates are made for the domains
// the gateway starts with: a domain added later would be routed but get no
// certificate, and one removed would keep its certificate. There the
// domains wait for the restart with the certificates.
var domainSetting = setting{"domain", func(c *Config) any { return &c.Domains }}

// restartOnlyFor is restartOnly for a gateway running with config running.
func restartOnlyFor(running *Config) []setting {
	if certsPerStartDomain(running) {
		return append(slices.Clip(restartOnly), domainSetting)
	}
	return restartOnly
}

// certsPerStartDomain reports whether the running TLS setup makes its
// certificates for the domains present at start: acme with the wildcard
// strategy (one *.<domain> order per domain, managed from start) and
// self-signed (one leaf per domain). On-demand acme asks the live route
// table at each handshake, files serve whatever the file holds, and off has
// no certificates, so there a domain change applies on reload.
func certsPerStartDomain(running *Config) bool {
	switch running.TLS.Mode {
	case TLSACME:
		return running.TLS.ACME.Strategy == StrategyWildcard
	case TLSSelfSigned:
		return true
	}
	return false
}

// RestartNeeded lists the settings that differ between old and new but only
// take effect after a restart (listen.*, data_dir, docker.*, tls.mode, ...;
// domain when the running TLS setup has certificates per start domain).
// Nil when old is nil.
func RestartNeeded(old, new *Config) []string {
	if old == nil || new == nil {
		return nil
	}
	var out []string
	for _, f := range restartOnlyFor(old) {
		if !reflect.DeepEqual(reflect.ValueOf(f.get(old)).Elem().Interface(), reflect.ValueOf(f.get(new)).Elem().Interface()) {
			out = append(out, f.name)
		}
	}
	return out
}

// keepRestartOnly copies the restart-only settings from old into new, so the
// live config describes what actually runs.
func keepRestartOnly(old, new *Config) {
	for _, f := range restartOnlyFor(old) {
		reflect.ValueOf(f.get(new)).Elem().Set(reflect.ValueOf(f.get(old)).Elem())
	}
}
