package gateway

import (
	"time"

	"github.com/previewgate/previewgate/config"
)

// Which names are worth an on-demand certificate (#24, 7). A well-formed
// sandbox-<id> name alone is not: at the TLS handshake nothing has checked
// a token yet, so anyone could make up ids and spend a public CA's budget
// for the domain. A name is worth one when it is a configured route's
// host, when its sandbox exists as far as the manager knows, or when a
// backend announced the id through the admin API shortly before.

// announceTTL is how long an announced id stays worth a certificate
// without existing: time for the backend to hand out the URL and the
// browser to open it.
const announceTTL = time.Hour

// maxAnnounced bounds the ids remembered as announced, in memory:
// on-demand ACME runs on one replica (docs/tls.md).
const maxAnnounced = 10_000

// Announce makes sandbox id's names worth an on-demand certificate for an
// hour, before the sandbox exists. False if id is not a valid id.
func (g *Gateway) Announce(id string) bool {
	if !config.ValidID(id) {
		return false
	}
	g.announced.Add(id)
	return true
}

// WorthCertificate reports whether host, which Serves approves, deserves
// an on-demand certificate: a route's host, or a sandbox host whose
// sandbox exists (as far as the manager knows, no runtime call) or was
// announced, for a port its template (an announced one's: any template)
// lists. Every other port answers 404 unknown_port (portError), and one
// known id would otherwise make 65535 names, each an order at the CA.
func (g *Gateway) WorthCertificate(host string) bool {
	t := g.table.Load()
	rt, herr := t.resolve(host)
	if herr != nil {
		return false
	}
	if _, isRoute := t.routes[hostname(host)]; isRoute {
		return true
	}
	if s := g.sb.Sandbox(rt.sandbox).Snapshot(); s.Exists {
		return portError(rt, t.cfg.Templates[s.Template]) == nil
	}
	if !g.announced.Has(rt.sandbox) {
		return false
	}
	for _, tpl := range t.cfg.Templates {
		if portError(rt, tpl) == nil {
			return true
		}
	}
	return false
}
