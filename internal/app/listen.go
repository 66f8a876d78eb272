package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/gateway"
	"github.com/previewgate/previewgate/internal/h1server"
)

// listenAll opens the admin listener, then the preview listeners: https
// and http (ACME challenges and the redirect) with TLS, else http alone.
func (a *App) listenAll() error {
	cfg := a.cfg
	// The preview listeners share one connection cap; the admin listener
	// has none, and the cap leaves descriptors for it.
	previewConns := h1server.NewConnLimiter(gateway.ConnCaps(cfg.Limits))
	a.log.Info("connection caps", "max_connections", previewConns.Max(), "connections_per_ip", cfg.Limits.ConnectionsPerIP)
	adm := admin.New(admin.Options{Config: a.store.Load, Replace: a.replace, CheckFiles: CheckFiles, Sandboxes: a.mgr, Settings: a.recs, Logs: a.caps.Logs, Images: a.caps.Images, Announce: a.gw.Announce,
		Ready: func(context.Context) error { return a.certs.Ready() }, Metrics: a.metrics.Handler(),
		Traffic: a.traffic, Log: a.log.With("component", "admin"), PreviewURL: func(id string) string { return PreviewBase(a.store.Load(), id) }})
	if err := a.listen("admin", cfg.Listen.Admin, adm, nil, nil); err != nil {
		return err
	}
	if err := a.listenMetrics(); err != nil {
		return err
	}
	if cfg.TLS.Mode == config.TLSOff {
		return a.listen("http", cfg.Listen.HTTP, a.gw, nil, previewConns)
	}
	if err := a.listen("https", cfg.Listen.HTTPS, a.gw, a.certs.TLSConfig(), previewConns); err != nil {
		return err
	}
	return a.listen("http", cfg.Listen.HTTP, a.certs.HTTPHandler(a.gw), nil, previewConns)
}

// listenMetrics opens listen.metrics when set: GET /metrics alone, without
// the admin token, for scrapers that cannot send one; everything else 404.
func (a *App) listenMetrics() error {
	addr := a.cfg.Listen.Metrics
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.Handler())
	return a.listen("metrics", addr, mux, nil, nil)
}

// listen serves h on addr until drain; a listener that fails reports to
// a.errc. conns caps its connections (nil: no cap).
func (a *App) listen(name, addr string, h http.Handler, tc *tls.Config, conns *h1server.ConnLimiter) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s %s: %w", name, addr, err)
	}
	// The gateway's own listeners take its lean loop (gateway.NewServer);
	// the others (admin, metrics, ACME's redirect) are the engine's alone,
	// with the same limits.
	var srv *h1server.Server
	if h == http.Handler(a.gw) {
		srv = gateway.NewServer(a.cfg, a.gw, a.log)
	} else {
		srv = h1server.New(gateway.ServerOptions(a.cfg.Limits), h, a.log)
	}
	srv.TLSConfig = tc
	srv.Conns = conns
	a.servers = append(a.servers, srv)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			a.errc <- fmt.Errorf("%s listener: %w", name, err)
		}
	}()
	a.log.Info("listening", "listener", name, "addr", ln.Addr().String())
	return nil
}

// drain lets in-flight requests finish for up to shutdownGrace.
func (a *App) drain() {
	a.log.Info("shutting down: draining requests", "grace", shutdownGrace)
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Upgraded connections are not waited for by Shutdown: the gateway closes
	// them with 1001 while the servers finish in-flight requests.
	go a.gw.Close()
	var wg sync.WaitGroup
	for _, srv := range a.servers {
		wg.Go(func() { srv.Shutdown(shutCtx) })
	}
	wg.Wait()
	a.gw.Close()
	a.log.Info("stopped; containers keep running")
}

// shutdownGrace bounds how long in-flight requests may finish on SIGTERM.
const shutdownGrace = 25 * time.Second
