package config

import (
	"reflect"
	"slices"
	"strings"
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

// restartOnly lists the settings a running gateway cannot change, by
// their keys in the file: their listeners, state, Docker client and
// certificate manager are built once at start.
var restartOnly = []string{
	"listen.http", "listen.https", "listen.admin", "listen.metrics", "data_dir",
	"scope", // the labels of everything the runtime makes, fixed at start
	"docker.host", "docker.network", "docker.replicas",
	"runtime", // the sandbox manager's engine (Docker client or Kubernetes clientset)
	"tls.mode", "tls.acme", "tls.cert_file", "tls.key_file", "log.level", "log.format",
	// The sandbox manager and the listeners take these when they start.
	"limits.max_concurrent_starts", "limits.start_queue", "limits.start_queue_timeout",
	"limits.max_header_bytes", "limits.read_header_timeout", "limits.idle_timeout",
	"limits.body_timeout", "limits.body_min_rate", "limits.write_timeout",
	"limits.connections_per_ip", "limits.max_connections",
}

// setting is the field of c at key path (as restartOnly names it).
func setting(c *Config, path string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for _, k := range strings.Split(path, ".") {
		f, ok := fieldsOf(v.Type())[k]
		if !ok {
			panic("config: no setting " + path) // restartOnly names a key that does not exist
		}
		v = v.FieldByIndex(f.index)
	}
	return v
}

// domainSetting is restart-only where the running TLS setup makes its
// certificates for the domains present at start: acme with the wildcard
// strategy (one *.<domain> order per domain, managed from start) and
// self-signed (one leaf per domain). There a domain added later would be
// routed but get no certificate, and one removed would keep its
// certificate, so the domains wait for the restart with the certificates.
// On-demand acme asks the live route table at each handshake, files serve
// whatever the file holds, and off has no certificates: there a domain
// change applies on reload.
const domainSetting = "domain"

// restartOnlyFor is restartOnly for a gateway running with config running.
func restartOnlyFor(running *Config) []string {
	if t := running.TLS; t.Mode == TLSSelfSigned || t.Mode == TLSACME && t.ACME.Strategy == StrategyWildcard {
		return append(slices.Clip(restartOnly), domainSetting)
	}
	return restartOnly
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
	for _, k := range restartOnlyFor(old) {
		if !reflect.DeepEqual(setting(old, k).Interface(), setting(new, k).Interface()) {
			out = append(out, k)
		}
	}
	return out
}

// keepRestartOnly copies the restart-only settings from old into new, so the
// live config describes what actually runs.
func keepRestartOnly(old, new *Config) {
	for _, k := range restartOnlyFor(old) {
		setting(new, k).Set(setting(old, k))
	}
}
