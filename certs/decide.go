package certs

import (
	"github.com/previewgate/previewgate/config"
)

// SandboxHostDecider returns the host decision for on-demand certificates:
// it approves sandbox-<valid id>.<domain> and <port>-sandbox-<valid id>.<domain>
// (a port preview, #22; the label fits 63 characters) for each of domains, and any host
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
		if _, _, ok, _ := config.SandboxPortFromHost(host, ds); ok {
			return true
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

// normalizeHost is config.NormalizeHost, "" for a refused host.
func normalizeHost(host string) string {
	h, _ := config.NormalizeHost(host)
	return h
}
