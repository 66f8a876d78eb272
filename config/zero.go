package config

import (
	"fmt"
	"reflect"
	"slices"
)

// A key whose zero value the defaults replace (a template's idle_timeout,
// limits.max_running, auth.link_ttl, ...) reads, written as 0, like "off" or "never" (as
// a rate's 0 is), yet ran as the default: idle_timeout: 0 stopped
// sandboxes after 15m, max_keep_up: 0 still let a backend keep one up 4h.
// Written out, such a zero is therefore an error; leaving the key out
// still means the default.

// defaultedTemplateKeys are the template keys, by path under the
// template, that applyDefaults fills when zero.
var defaultedTemplateKeys = []struct {
	key string
	get func(*Template) any
}{
	{"port", func(t *Template) any { return t.Port }},
	{"memory", func(t *Template) any { return t.Memory }},
	{"cpus", func(t *Template) any { return t.CPUs }},
	{"pids", func(t *Template) any { return t.Pids }},
	{"ready.timeout", func(t *Template) any { return t.Ready.Timeout }},
	{"idle_timeout", func(t *Template) any { return t.IdleTimeout }},
	{"max_socket_idle", func(t *Template) any { return t.MaxSocketIdle }},
	{"remove_after", func(t *Template) any { return t.RemoveAfter }},
	{"max_keep_up", func(t *Template) any { return t.MaxKeepUp }},
	{"max_body", func(t *Template) any { return t.MaxBodyBytes }},
}

// defaultedKeys are the other keys that ApplyDefaults fills when zero,
// and whose zero the docs give no meaning of its own (unlike
// limits.creates_per_subject_per_hour, max_running_per_subject and
// max_connections, and the rates, where 0 is off).
var defaultedKeys = []struct {
	key string
	get func(*Config) any
}{
	{"tls.acme.issue_per_hour", func(c *Config) any { return c.TLS.ACME.IssuePerHour }},
	{"auth.link_ttl", func(c *Config) any { return c.Auth.LinkTTL }},
	{"auth.max_link_ttl", func(c *Config) any { return c.Auth.MaxLinkTTL }},
	{"docker.replicas", func(c *Config) any { return c.Docker.Replicas }},
	{"limits.max_concurrent_starts", func(c *Config) any { return c.Limits.MaxConcurrentStarts }},
	{"limits.start_queue", func(c *Config) any { return c.Limits.StartQueue }},
	{"limits.start_queue_timeout", func(c *Config) any { return c.Limits.StartQueueTimeout }},
	{"limits.max_running", func(c *Config) any { return c.Limits.MaxRunning }},
	{"limits.websockets_per_sandbox", func(c *Config) any { return c.Limits.WebSocketsPerSandbox }},
	{"limits.websockets_per_ip", func(c *Config) any { return c.Limits.WebSocketsPerIP }},
	{"limits.max_header_bytes", func(c *Config) any { return c.Limits.MaxHeaderBytes }},
	{"limits.read_header_timeout", func(c *Config) any { return c.Limits.ReadHeaderTimeout }},
	{"limits.idle_timeout", func(c *Config) any { return c.Limits.IdleConnTimeout }},
	{"limits.body_timeout", func(c *Config) any { return c.Limits.BodyTimeout }},
	{"limits.body_min_rate", func(c *Config) any { return c.Limits.BodyMinRate }},
	{"limits.write_timeout", func(c *Config) any { return c.Limits.WriteTimeout }},
	{"limits.connections_per_ip", func(c *Config) any { return c.Limits.ConnectionsPerIP }},
	{"limits.limiter_entries", func(c *Config) any { return c.Limits.LimiterEntries }},
}

// failWrittenZeros reports every key of defaultedTemplateKeys and
// defaultedKeys that the file writes as zero. It runs on the decoded
// config before defaults are applied.
func (d *decoder) failWrittenZeros(c *Config) {
	var dt Template
	dt.applyDefaults()
	dc := Config{}
	dc.ApplyDefaults()
	check := func(path string, v, def any) {
		if l, ok := d.locs[path]; !ok || l.Line == 0 || !reflect.ValueOf(v).IsZero() {
			return
		}
		d.fail(fmt.Sprintf("0 is not off or unlimited here: it would mean the default (%v); leave the key out for that, or write the value you want", def), path)
	}
	names := make([]string, 0, len(c.Templates))
	for n := range c.Templates {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if t := c.Templates[n]; t != nil {
			for _, k := range defaultedTemplateKeys {
				check("templates."+n+"."+k.key, k.get(t), k.get(&dt))
			}
		}
	}
	for _, k := range defaultedKeys {
		check(k.key, k.get(c), k.get(&dc))
	}
}
