package config

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
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
		case !validHostname(h):
			d.fail(fmt.Sprintf("invalid domain %q: not a hostname", h), at, "domain")
		case len(h) > 253-64:
			d.fail(fmt.Sprintf("domain %q is too long for sandbox-<id>.%s", h, h), at, "domain")
		case seen[h]:
			d.fail(fmt.Sprintf("duplicate domain %q", h), at, "domain")
		}
		seen[h] = true
	}
}

// checkAddr validates a listen address "host:port" or ":port".
func checkAddr(addr string) error {
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
		if err := checkAddr(*a.p); err != nil {
			d.fail(err.Error(), "listen."+a.name, "listen")
			continue
		}
		if other, ok := seen[*a.p]; ok {
			d.fail(fmt.Sprintf("same address as listen.%s", other), "listen."+a.name, "listen")
		}
		seen[*a.p] = a.name
	}
}

func (d *decoder) validateTLS(c *Config) {
	t := &c.TLS
	switch t.Mode {
	case TLSOff, TLSSelfSigned:
	case TLSFiles:
		if t.CertFile == "" || t.KeyFile == "" {
			d.fail("tls.mode files needs tls.cert_file and tls.key_file", "tls.mode", "tls")
		}
	case TLSACME:
		a := &t.ACME
		if _, err := ParseURL(a.CA); err != nil {
			d.fail(err.Error(), "tls.acme.ca", "tls.acme")
		}
		if a.Email != "" && !strings.Contains(a.Email, "@") {
			d.fail(fmt.Sprintf("invalid email %q", a.Email), "tls.acme.email")
		}
		if a.Ask != "" {
			if _, err := ParseURL(a.Ask); err != nil {
				d.fail(err.Error(), "tls.acme.ask")
			}
		}
		if a.IssuePerHour < 0 {
			d.fail(fmt.Sprintf("must not be negative, got %d", a.IssuePerHour), "tls.acme.issue_per_hour")
		}
		switch a.Strategy {
		case StrategyOnDemand:
		case StrategyWildcard:
			r := &a.RFC2136
			if r.Server == "" {
				d.fail("strategy wildcard needs acme.rfc2136.server (DNS-01)", "tls.acme.strategy")
			} else if err := checkAddr(r.Server); err != nil {
				d.fail(err.Error(), "tls.acme.rfc2136.server")
			}
			if r.TSIGKey == "" || r.TSIGSecret == "" {
				d.fail("strategy wildcard needs acme.rfc2136.tsig_key and tsig_secret", "tls.acme.strategy")
			} else if _, err := base64.StdEncoding.DecodeString(string(r.TSIGSecret)); err != nil {
				d.fail("tsig_secret is not valid base64", "tls.acme.rfc2136.tsig_secret")
			}
			if _, err := TSIGAlgorithm(r.TSIGAlg); err != nil {
				d.fail(err.Error(), "tls.acme.rfc2136.tsig_alg", "tls.acme.rfc2136")
			}
		default:
			d.fail(fmt.Sprintf("invalid strategy %q (want on-demand or wildcard)", a.Strategy), "tls.acme.strategy", "tls.acme")
		}
	default:
		d.fail(fmt.Sprintf("invalid mode %q (want acme, files, self-signed or off)", t.Mode), "tls.mode", "tls")
	}
}

// IsLocalDomain reports whether h is localhost or under it: browsers treat
// http://*.localhost as a secure context and keep Secure cookies there.
func IsLocalDomain(h string) bool {
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// validatePlainHTTP refuses previews over plain HTTP on a real domain with
// nothing in front that could terminate TLS: the token exchange sets a
// Secure cookie, which browsers drop over http:// everywhere but localhost,
// so every browser lands on "needs an access token" (#24, 1). A proxy in
// trusted_proxies is taken to terminate TLS: its clients reach the preview
// over https and keep the cookie.
//
// The other way round, ACME cannot work for a localhost domain: no CA can
// reach *.localhost over HTTP-01 nor find it in DNS, so every handshake
// would fail after the CA's timeout.
func (d *decoder) validatePlainHTTP(c *Config) {
	for i, h := range c.Domains {
		if msg := domainProblem(c, h); msg != "" {
			d.fail(msg, fmt.Sprintf("domain[%d]", i), "domain")
		}
	}
}

// DomainProblems is validatePlainHTTP for a config changed after
// validation (serve's --domain flag): one message per domain that can
// only fail at run time.
func DomainProblems(c *Config) []string {
	var out []string
	for _, h := range c.Domains {
		if msg := domainProblem(c, h); msg != "" {
			out = append(out, msg)
		}
	}
	return out
}

func domainProblem(c *Config, h string) string {
	switch {
	case c.TLS.Mode == TLSACME && IsLocalDomain(h):
		return fmt.Sprintf("domain %q cannot get an ACME certificate: no CA can reach a localhost name; "+
			"use tls.mode self-signed (or off: browsers keep Secure cookies on http://*.localhost)", h)
	case c.TLS.Mode == TLSOff && len(c.TrustedProxies) == 0 && !IsLocalDomain(h) && validHostname(h):
		return fmt.Sprintf("domain %q is served over plain http (tls.mode off) with no TLS-terminating proxy in front: "+
			"browsers drop the Secure cookie the token exchange sets, so no preview opens in a browser; "+
			"set tls.mode (acme, files or self-signed), or put a TLS-terminating proxy in front and list its address in trusted_proxies", h)
	}
	return ""
}

func (d *decoder) validateAuth(c *Config) {
	a := &c.Auth
	for i := range a.Issuers {
		if a.Issuers[i] == "" {
			d.fail("empty issuer", fmt.Sprintf("auth.issuers[%d]", i))
		}
	}
	if len(a.Keys) == 0 && a.JWKSURL == "" {
		d.fail("auth needs at least one of keys and jwks_url: without them no token can be verified", "auth", "")
	}
	kids := map[string]bool{}
	for i := range a.Keys {
		k, kp := &a.Keys[i], fmt.Sprintf("auth.keys[%d]", i)
		if k.KID == "" {
			d.fail("key needs a kid", kp+".kid", kp)
		} else if kids[k.KID] {
			d.fail(fmt.Sprintf("duplicate kid %q", k.KID), kp+".kid")
		}
		kids[k.KID] = true
		switch {
		case k.Alg == "":
			d.fail(fmt.Sprintf("key needs an alg (one of %s)", strings.Join(Algorithms, " ")), kp)
			continue
		case !slices.Contains(Algorithms, k.Alg):
			d.fail(fmt.Sprintf("invalid alg %q (want one of %s)", k.Alg, strings.Join(Algorithms, " ")), kp+".alg")
			continue
		}
		if minLen := HMACMinLen(k.Alg); minLen > 0 {
			switch {
			case k.Secret == "":
				d.fail(fmt.Sprintf("alg %s needs a secret", k.Alg), kp+".secret", kp+".alg")
			case len(k.Secret) < minLen:
				// Never echo the secret, only its length.
				d.fail(fmt.Sprintf("secret for %s must be at least %d bytes, got %d", k.Alg, minLen, len(k.Secret)), kp+".secret")
			}
			if k.PublicKeyFile != "" || k.PrivateKeyFile != "" {
				d.fail(fmt.Sprintf("alg %s uses a shared secret, not key files", k.Alg), kp+".public_key_file", kp+".private_key_file")
			}
		} else {
			if k.Secret != "" {
				d.fail(fmt.Sprintf("alg %s uses public_key_file, not a secret", k.Alg), kp+".secret")
			}
			if k.PublicKeyFile == "" {
				d.fail(fmt.Sprintf("alg %s needs public_key_file", k.Alg), kp+".alg")
			}
		}
	}
	if a.JWKSURL != "" {
		if _, err := ParseURL(a.JWKSURL); err != nil {
			d.fail(err.Error(), "auth.jwks_url")
		}
	}
	for i, o := range a.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			d.fail(err.Error(), fmt.Sprintf("auth.allowed_origins[%d]", i))
		}
	}
	if a.CookieName != "" && strings.IndexFunc(a.CookieName, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}) >= 0 {
		d.fail(fmt.Sprintf("invalid cookie_name %q (letters, digits, _ - . only)", a.CookieName), "auth.cookie_name")
	}
	if lt, mt := a.LinkTTL.D(), a.MaxLinkTTL.D(); lt > mt { // defaults applied
		d.fail(fmt.Sprintf("link_ttl %s is longer than max_link_ttl %s", lt, mt), "auth.link_ttl")
	}
}

// checkOrigin accepts a browser origin: scheme://host[:port], nothing more.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("invalid origin %q (want scheme://host[:port])", o)
	}
	return nil
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
	if dk.Replicas < 1 || dk.Replicas > maxReplicas {
		d.fail(fmt.Sprintf("invalid replicas %d (want 1 to %d)", dk.Replicas, maxReplicas), "docker.replicas", "docker")
	}
}

// maxReplicas bounds docker.replicas: a count, not a resource, but a typo
// such as 30000 is better caught.
const maxReplicas = 1000

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
		case !validHostname(r.Host):
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
