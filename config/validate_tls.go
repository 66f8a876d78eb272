package config

import (
	"encoding/base64"
	"fmt"
	"strings"
)

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
			} else if err := CheckAddr(r.Server); err != nil {
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
	case c.TLS.Mode == TLSOff && len(c.TrustedProxies) == 0 && !IsLocalDomain(h) && ValidHostname(h):
		return fmt.Sprintf("domain %q is served over plain http (tls.mode off) with no TLS-terminating proxy in front: "+
			"browsers drop the Secure cookie the token exchange sets, so no preview opens in a browser; "+
			"set tls.mode (acme, files or self-signed), or put a TLS-terminating proxy in front and list its address in trusted_proxies", h)
	}
	return ""
}
