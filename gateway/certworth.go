package gateway

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

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

// maxAnnounced bounds the ids remembered as announced.
const maxAnnounced = 10_000

// announced remembers ids announced through the admin API, in memory:
// on-demand ACME runs on one replica (docs/tls.md).
type announced struct {
	now func() time.Time
	mu  sync.Mutex // guards lru
	lru *simplelru.LRU[string, time.Time]
}

func (a *announced) add(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lru == nil {
		a.lru, _ = simplelru.NewLRU[string, time.Time](maxAnnounced, nil)
	}
	a.lru.Add(id, a.now().Add(announceTTL))
}

func (a *announced) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lru == nil {
		return false
	}
	until, ok := a.lru.Get(id)
	return ok && a.now().Before(until)
}

// Announce makes sandbox id's names worth an on-demand certificate for an
// hour, before the sandbox exists. False if id is not a valid id.
func (g *Gateway) Announce(id string) bool {
	if !config.ValidID(id) {
		return false
	}
	g.announced.add(id)
	return true
}

// WorthCertificate reports whether host, which Serves approves, deserves
// an on-demand certificate: a route's host, or a sandbox host whose
// sandbox exists (as far as the manager knows, no runtime call) or was
// announced.
func (g *Gateway) WorthCertificate(host string) bool {
	t := g.table.Load()
	rt, herr := t.resolve(host)
	if herr != nil {
		return false
	}
	if _, isRoute := t.routes[hostname(host)]; isRoute {
		return true
	}
	if _, ok := g.sb.Known(rt.sandbox); ok {
		return true
	}
	return g.announced.has(rt.sandbox)
}
