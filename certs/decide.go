package certs

import (
	"strings"
	"unicode/utf8"

	"github.com/previewgate/previewgate/config"
)

// sandboxPrefix starts every sandbox host label: sandbox-<id>.<domain>.
const sandboxPrefix = "sandbox-"

// SandboxHostDecider returns the host decision for on-demand certificates:
// it approves sandbox-<valid id>.<domain> for each of domains, and any host
// that routeHosts lists (nil means no routes). routeHosts is called on every
// decision, so it can read the live route table; it should be cheap.
//
// Comparison ignores ASCII case and one trailing dot. Nothing else is approved, so
// a client cannot make the gateway ask the CA for arbitrary names.
func SandboxHostDecider(domains []string, routeHosts func() []string) func(host string) bool {
	ds := make([]string, 0, len(domains))
	for _, d := range domains {
		if d = normalizeHost(d); d != "" {
			ds = append(ds, d)
		}
	}
	return func(host string) bool {
		host = normalizeHost(host)
		if host == "" {
			return false
		}
		for _, d := range ds {
			label, ok := strings.CutSuffix(host, "."+d)
			if !ok {
				continue
			}
			if id, ok := strings.CutPrefix(label, sandboxPrefix); ok && config.ValidID(id) {
				return true
			}
		}
		if routeHosts != nil {
			for _, h := range routeHosts() {
				if normalizeHost(h) == host {
					return true
				}
			}
		}
		return false
	}
}

// normalizeHost lowercases host and drops one trailing dot. A host with a
// non-ASCII byte becomes "": Unicode case folding could turn it into an
// approved ASCII name (the Kelvin sign lowercases to "k"), and SNI carries
// A-labels only anyway.
func normalizeHost(host string) string {
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			return ""
		}
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
