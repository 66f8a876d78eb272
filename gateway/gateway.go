// Package gateway is previewgate's HTTP handler chain: it maps a host to a
// sandbox, checks the access token, applies limits, wakes the sandbox through
// sandboxmgr and reverse-proxies HTTP, WebSocket and SSE to it. It reports
// what it did to a Metrics it is handed and never imports the admin API or
// a metrics registry. It never calls Docker or verifies signatures itself.
// It decides; the packages it drives carry out: internal/pages renders its
// answers, internal/limits keeps its limits' state, internal/meter
// measures each exchange, internal/outbound applies the host mode it
// chose to the outbound head, package links says whether a share link
// opens a request (the gateway says what the user is told), and the
// engine (internal/h1server, upstream, tunnel, wire) speaks HTTP.
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/h1server"
	"github.com/previewgate/previewgate/internal/limits"
	"github.com/previewgate/previewgate/internal/tunnel"
	"github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// Sandboxes is what the gateway needs from the sandbox manager.
// *sandboxmgr.Manager implements it.
type Sandboxes interface {
	// Sandbox is sandbox id's handle (no runtime call): its Snapshot
	// (template, settings, cached endpoint, wake progress), and Ensure,
	// Wake, Touch, Hold and Forget on it. Ensure's errors wrap
	// runtime.ErrUnavailable, ErrCapacity, ErrNotReady, ErrAsleep or what
	// opts.OnCreate returned; its ctx bounds only the caller's wait.
	Sandbox(id string) sandboxmgr.Handle
}

var _ Sandboxes = (*sandboxmgr.Manager)(nil)

// Gateway serves preview hosts. Create it with New, feed it configs with
// Apply; it is an http.Handler.
type Gateway struct {
	sb          Sandboxes
	recs        links.Records // each sandbox's share links
	log         *slog.Logger
	tls         bool // previews are served over TLS
	netHTTPOnly bool // NewServer leaves the lean loop off
	table       atomic.Pointer[table]
	proxy       *proxy
	limit       *limiter
	metrics     Metrics
	traffic     Traffic
	sockets     *tunnel.Registry
	streams     *streams       // open streams admitted without a token, and their grants (grants.go)
	creates     *limits.Window // creates_per_subject_per_hour; outlives reloads
	announced   *limits.Recent // ids worth a certificate before they exist (certworth.go)
	// exchanges counts proxied exchanges in flight per client and in all,
	// with the connection caps (limits.go admitExchange).
	exchanges *h1server.ConnLimiter
	reqSeq    atomic.Uint64 // request ids
	reqPfx    string

	upgrades sync.WaitGroup // upgraded (WebSocket) requests in flight
	draining context.Context
	drain    context.CancelFunc
}

// Options configure New. Zero values work.
type Options struct {
	// TLS says previews are served over HTTPS (cookie names, X-Forwarded-Proto).
	TLS bool
	// Metrics receives what the gateway did. Nil means nothing is recorded.
	Metrics Metrics
	// Traffic receives each request proxied to a sandbox (the per-sandbox
	// request log). Nil means nothing is recorded.
	Traffic Traffic
	// NetHTTPOnly serves every request on net/http: NewServer's lean
	// HTTP/1.1 loop stays off (tests and the bench compare the two).
	NetHTTPOnly bool
	// Records are each sandbox's share links (package records, as links
	// reads them); its other settings come in its Snapshot. Nil: none.
	Records links.Records
}

// New returns a gateway serving cfg. It owns the auth verifier built for
// each applied config.
func New(cfg *config.Config, sb Sandboxes, opts Options, log *slog.Logger) (*Gateway, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{sb: sb, recs: opts.Records, log: log, tls: opts.TLS, netHTTPOnly: opts.NetHTTPOnly}
	if g.recs == nil {
		g.recs = (*records.Records)(nil) // keeps nothing
	}
	g.draining, g.drain = context.WithCancel(context.Background())
	g.proxy = newProxy(g)
	g.limit = newLimiter()
	g.metrics, g.traffic = opts.Metrics, opts.Traffic
	if g.metrics == nil {
		g.metrics = noMetrics{}
	}
	if g.traffic == nil {
		g.traffic = noTraffic{}
	}
	g.sockets = tunnel.NewRegistry()
	g.streams = newStreams(g)
	g.creates = limits.NewWindow(time.Hour, time.Now)
	g.announced = limits.NewRecent(maxAnnounced, announceTTL, time.Now)
	g.exchanges = h1server.NewConnLimiter(ConnCaps(cfg.Limits))
	g.limit.onReject = g.metrics.Rejected
	g.reqPfx = newRequestIDPrefix()
	if err := g.Apply(cfg); err != nil {
		return nil, err
	}
	return g, nil
}

// table is everything a request needs from one config, prepared once per
// config so the hot path does a single atomic load.
type table struct {
	cfg             *config.Config
	domains         []string // lower-case, no trailing dot
	routes          map[string]*route
	defaultTemplate *config.Template
	verifier        *auth.Verifier
}

// route is what a host addresses: a sandbox or a fixed upstream.
type route struct {
	sandbox  string           // sandbox id, or "" for upstream routes
	port     int              // <port>-sandbox-<id>: that port of the sandbox; 0: its template's port
	template *config.Template // template to create the sandbox from; may be nil
	upstream *url.URL         // fixed upstream, or nil
	// public: the route itself is declared public (routes[].public). A
	// sandbox is public also when its own template is (policy).
	public bool
}

// Apply builds the table for cfg completely, then swaps it in. If any step
// fails, the old table keeps serving. In-flight requests keep the table they
// loaded.
func (g *Gateway) Apply(cfg *config.Config) error {
	commit, _, err := g.Prepare(cfg)
	if err != nil {
		return err
	}
	commit()
	return nil
}

// Prepare builds the table for cfg completely (its JWKS fetch included)
// without changing what serves, for config.WatcherConfig.Prepare: commit
// swaps it in and does no I/O; drop releases a table that is never
// committed. Preparations may overlap.
func (g *Gateway) Prepare(cfg *config.Config) (commit, drop func(), err error) {
	t, err := g.buildTable(cfg)
	if err != nil {
		return nil, nil, err
	}
	commit = func() {
		old := g.table.Swap(t)
		if old != nil && old.verifier != nil {
			// JWKS refresh of the old verifier stops; requests that still
			// hold it keep verifying against its cached keys.
			old.verifier.Close()
		}
	}
	drop = func() {
		if t.verifier != nil {
			t.verifier.Close()
		}
	}
	return commit, drop, nil
}

func (g *Gateway) buildTable(cfg *config.Config) (*table, error) {
	v, err := auth.NewVerifier(cfg.Auth, g.tls, auth.WithLogger(g.log.With("component", "auth")))
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	t := &table{cfg: cfg, routes: make(map[string]*route, len(cfg.Routes)), verifier: v,
		defaultTemplate: cfg.Template("")}
	for _, d := range cfg.Domains {
		t.domains = append(t.domains, strings.TrimSuffix(strings.ToLower(d), "."))
	}
	for _, r := range cfg.Routes {
		rt := &route{sandbox: r.Sandbox, public: r.Public}
		if r.Upstream != "" {
			u, err := url.Parse(string(r.Upstream))
			if err != nil {
				v.Close()
				return nil, fmt.Errorf("route %s: upstream: %w", r.Host, err)
			}
			rt.upstream = u
		} else {
			rt.template = cfg.Template(r.Template)
		}
		t.routes[strings.ToLower(r.Host)] = rt
	}
	return t, nil
}

// The gateway is the sandbox manager's Listener: it closes what it holds to
// a sandbox or a container instance that goes away.
var _ sandboxmgr.Listener = (*Gateway)(nil)

// BeforeStop closes the WebSockets proxied to sandbox id with 1001 (going
// away) before the manager stops or removes it.
func (g *Gateway) BeforeStop(id string) { g.CloseSockets(id) }

// InstanceGone closes every pooled upstream connection to a container
// instance (sandboxmgr.Endpoint.Instance) that stopped, died, paused or was
// replaced; the sandbox manager reports them.
func (g *Gateway) InstanceGone(instance string) { g.proxy.pool.CloseInstance(instance) }

// Close starts draining: upgraded connections are cancelled, and Close waits
// for them to end. Call it after http.Server.Shutdown, which does not wait
// for hijacked connections.
func (g *Gateway) Close() {
	g.drain()
	if n := g.sockets.CloseAll(""); n > 0 {
		g.log.Info("closed websockets with 1001 (going away)", "count", n)
	}
	g.streams.close()
	g.upgrades.Wait()
	g.proxy.pool.CloseIdle()
	if t := g.table.Load(); t != nil && t.verifier != nil {
		t.verifier.Close()
	}
}
