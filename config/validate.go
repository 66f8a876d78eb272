package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// fail records an error at the first of paths (YAML paths, as the
// decoder records them: "templates.web.memory", "routes[1]", "" for the
// document) that the file holds, prefixed with that path. A value the
// file does not hold (a default) falls through to the next path; the last
// resort is 1:1.
func (d *decoder) fail(msg string, paths ...string) {
	for _, p := range paths {
		if l, ok := d.locs[p]; ok && l.Line > 0 { // zero: its decoding stopped early
			if p != "" {
				msg = p + ": " + msg
			}
			d.errAt(l.Pos, "%s", msg)
			return
		}
	}
	d.errAt(Pos{1, 1}, "%s", msg)
}

// failKey is fail at the key naming the value (e.g. a template's name).
func (d *decoder) failKey(msg string, path string) {
	if l, ok := d.locs[path]; ok && l.Key.Line > 0 {
		d.errAt(l.Key, "%s: %s", path, msg)
		return
	}
	d.fail(msg, path)
}

// validate checks c, which has defaults applied, and normalizes hostnames to
// lowercase. Positions are looked up by YAML path (see fail).
func (d *decoder) validate(c *Config) {
	d.validateDomains(c)
	d.validateListen(c)
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		d.fail("admin_token is too short (use at least 16 random characters)", "admin_token")
	}
	if c.Scope != "" && !ValidScope(c.Scope) {
		d.fail(fmt.Sprintf("invalid scope %q (lowercase letters, digits and inner hyphens, at most 63)", c.Scope), "scope")
	}
	d.validateTLS(c)
	d.validatePlainHTTP(c)
	d.validateAuth(c)
	d.validateDocker(c)
	d.validateRuntime(c)
	d.validateTemplates(c)
	d.validateRoutes(c)
	d.validateLimits(&c.Limits)
	d.validateAPITokens(c)
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		d.fail(fmt.Sprintf("invalid log level %q (want debug, info, warn or error)", c.Log.Level), "log.level", "log")
	}
	if !slices.Contains([]string{"auto", "text", "json"}, c.Log.Format) {
		d.fail(fmt.Sprintf("invalid log format %q (want auto, text or json)", c.Log.Format), "log.format", "log")
	}
}

func (d *decoder) validateDomains(c *Config) {
	if len(c.Domains) == 0 {
		d.fail("domain is required (e.g. domain: preview.example.com)", "domain", "")
		return
	}
	seen := map[string]bool{}
	for i := range c.Domains {
		at := fmt.Sprintf("domain[%d]", i)
		h := strings.ToLower(strings.TrimSpace(c.Domains[i]))
		c.Domains[i] = h
		switch {
		case !ValidHostname(h):
			d.fail(fmt.Sprintf("invalid domain %q: not a hostname", h), at, "domain")
		case len(h) > 253-64:
			d.fail(fmt.Sprintf("domain %q is too long for sandbox-<id>.%s", h, h), at, "domain")
		case seen[h]:
			d.fail(fmt.Sprintf("duplicate domain %q", h), at, "domain")
		}
		seen[h] = true
	}
}

// CheckAddr checks a listener address, in the file or given outside it
// (serve --http): host:port or :port, port 1-65535.
func CheckAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid address %q (want host:port or :port)", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q out of range 1-65535", port)
	}
	return nil
}

func (d *decoder) validateListen(c *Config) {
	l := &c.Listen
	seen := map[string]string{}
	for _, a := range []struct {
		name string
		p    *string
	}{{"http", &l.HTTP}, {"https", &l.HTTPS}, {"admin", &l.Admin}, {"metrics", &l.Metrics}} {
		if a.name == "https" && c.TLS.Mode == TLSOff || a.name == "metrics" && *a.p == "" {
			continue // unused
		}
		if err := CheckAddr(*a.p); err != nil {
			d.fail(err.Error(), "listen."+a.name, "listen")
			continue
		}
		if other, ok := seen[*a.p]; ok {
			d.fail(fmt.Sprintf("same address as listen.%s", other), "listen."+a.name, "listen")
		}
		seen[*a.p] = a.name
	}
}

func (d *decoder) validateDocker(c *Config) {
	dk := &c.Docker
	if dk.Host != "" {
		scheme, _, ok := strings.Cut(dk.Host, "://")
		if !ok || !slices.Contains([]string{"unix", "tcp", "npipe", "ssh", "http", "https"}, scheme) {
			d.fail(fmt.Sprintf("invalid docker host %q (e.g. unix:///var/run/docker.sock, tcp://host:2376)", dk.Host), "docker.host")
		}
	}
	if !validName(dk.Network) {
		d.fail(fmt.Sprintf("invalid network name %q", dk.Network), "docker.network", "docker")
	}
	switch {
	case dk.Replicas > 1:
		d.fail(fmt.Sprintf("%d replicas: a Docker engine is served by one gateway per engine and scope (another one on the same data_dir "+
			"waits as a standby); more replicas need the Kubernetes runtime (docs/kubernetes.md)", dk.Replicas), "docker.replicas", "docker")
	case dk.Replicas < 1:
		d.fail(fmt.Sprintf("invalid replicas %d (want 1, or leave the key out)", dk.Replicas), "docker.replicas", "docker")
	}
}

// validName is a Docker-style name: a letter or digit, then letters, digits,
// '_', '.', '-'; at most 63 bytes.
func validName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '_' && r != '.' && r != '-') {
			return false
		}
	}
	return true
}

func (d *decoder) validateRoutes(c *Config) {
	hosts := map[string]bool{}
	for i := range c.Routes {
		r, rp := &c.Routes[i], fmt.Sprintf("routes[%d]", i)
		r.Host = strings.ToLower(strings.TrimSpace(r.Host))
		switch {
		case r.Host == "":
			d.fail("route needs a host", rp+".host", rp)
		case !ValidHostname(r.Host):
			d.fail(fmt.Sprintf("invalid host %q: not a hostname", r.Host), rp+".host")
		case hosts[r.Host]:
			d.fail(fmt.Sprintf("duplicate route host %q", r.Host), rp+".host")
		default:
			for _, dom := range c.Domains {
				if _, _, ok, malformed := SandboxPortFromHost(r.Host, []string{dom}); ok || malformed {
					d.fail(fmt.Sprintf("host %q is a sandbox host of domain %s; use another name", r.Host, dom), rp+".host")
				}
			}
		}
		hosts[r.Host] = true
		switch {
		case r.Sandbox != "" && r.Upstream != "":
			d.fail("route has both sandbox and upstream; set exactly one", rp)
		case r.Sandbox == "" && r.Upstream == "":
			d.fail("route needs a sandbox or an upstream", rp)
		case r.Sandbox != "":
			if !ValidID(r.Sandbox) {
				d.fail(fmt.Sprintf("invalid sandbox id %q (lowercase letters, digits, inner hyphens, 1-%d chars)", r.Sandbox, MaxIDLen), rp+".sandbox")
			}
			switch {
			case r.Template != "" && c.Templates[r.Template] == nil:
				d.fail(fmt.Sprintf("template %q is not defined in templates", r.Template), rp+".template")
			case r.Template == "" && c.DefaultTemplate == "":
				d.fail("route to a sandbox needs a template (set template here or default_template)", rp+".sandbox")
			}
		case r.Template != "":
			d.fail("template only applies to sandbox routes", rp+".template")
		}
	}
}

func (d *decoder) validateRates(r *RateLimits, path string) {
	for _, f := range []struct {
		key string
		rt  *Rate
	}{{"per_ip", r.PerIP}, {"per_sandbox", r.PerSandbox}, {"per_subject", r.PerSubject}} {
		rt, at := f.rt, join(path, f.key)
		if rt == nil {
			continue
		}
		switch {
		case rt.Rate < 0:
			d.fail(fmt.Sprintf("rate must not be negative, got %g", rt.Rate), at+".rate", at)
		case rt.Burst < 0:
			d.fail(fmt.Sprintf("burst must not be negative, got %d", rt.Burst), at+".burst", at)
		case rt.Rate > 0 && rt.Burst == 0:
			d.fail("burst must be at least 1 when rate is set", at+".burst", at)
		}
	}
}

func (d *decoder) validateLimits(l *Limits) {
	d.validateRates(&l.RateLimits, "limits")
	for _, f := range []struct {
		key string
		n   int
	}{{"max_concurrent_starts", l.MaxConcurrentStarts}, {"start_queue", l.StartQueue}, {"max_running", l.MaxRunning},
		{"websockets_per_sandbox", l.WebSocketsPerSandbox}, {"websockets_per_ip", l.WebSocketsPerIP},
		{"max_running_per_subject", l.MaxRunningPerSubject},
		{"limiter_entries", l.LimiterEntries}, {"connections_per_ip", l.ConnectionsPerIP}, {"max_connections", l.MaxConnections}} {
		if f.n < 0 {
			d.fail(fmt.Sprintf("must not be negative, got %d", f.n), "limits."+f.key, "limits")
		}
	}
	if n := l.CreatesPerSubjectPerHour; n < -1 {
		d.fail(fmt.Sprintf("must be positive, or -1 for unlimited, got %d", n), "limits.creates_per_subject_per_hour", "limits")
	}
}
