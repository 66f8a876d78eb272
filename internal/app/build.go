package app

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/previewgate/previewgate/certs"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/gateway"
	"github.com/previewgate/previewgate/metrics"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
	"github.com/previewgate/previewgate/traffic"
)

// The gateway's parts, built in order: the runtime and its records, the
// manager, the gateway, certificates, the config watcher; listen.go opens
// the listeners.

// App is one running gateway: what Serve builds, in the order it builds
// it, and how it stops.
type App struct {
	cfg *config.Config
	dev bool // the embedded development default: no file to watch
	log *slog.Logger
	// override puts serve's flags into a config read from the file.
	override func(*config.Config)

	store   *config.Store
	metrics *metrics.Metrics
	labels  map[string]string    // the gateway's scope (--label, config scope)
	caps    runtime.Capabilities // what the runtime can do beyond the manager's verbs
	recs    *records.Records     // per-sandbox settings and share links
	mgr     *sandboxmgr.Manager
	traffic *traffic.Recorder // this replica's per-sandbox request log
	gw      *gateway.Gateway
	certs   *certs.Manager
	replace func([]byte) ([]string, error) // admin PUT; nil without a file

	servers   []*gateway.Server
	errc      chan error          // a listener that failed
	closers   []func()            // run in reverse by close
	imageWork chan *config.Config // reloaded configs for the image worker
	hup       chan os.Signal      // SIGHUP, caught since serve began
	invoked   string              // the command as the user ran it
}

// close releases what was built, last built first.
func (a *App) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
}

// newRuntime makes the runtime the config names (lazily: it does not fail
// when the Docker engine or the API server is down) and the store that
// keeps its sandboxes' records. Kubernetes keeps them as ConfigMaps. A
// Docker engine is served by one gateway per scope, which keeps them in
// its data dir: Own takes them, and the scope on the engine, before the
// gateway serves (refused while a live gateway of the scope serves
// elsewhere); close gives both up after the manager closed.
func (a *App) newRuntime(ctx context.Context, labels map[string]string) (runtime.Runtime, records.Store, error) {
	cfg := a.cfg
	if cfg.Runtime.Kind == config.RuntimeKubernetes {
		rk := cfg.Runtime.Kubernetes
		rt, err := kube.New(kube.Config{Namespace: rk.Namespace, Kubeconfig: rk.Kubeconfig, InCluster: rk.InCluster,
			GatewayLabels: rk.Labels(), GatewayNamespace: rk.GatewayNamespace, GatewayCIDRs: rk.GatewayCIDRs,
			Egress: rk.Egress, EgressAllow: rk.EgressAllow,
			RunAsUser: rk.RunAsUser, ActivityEvery: rk.ActivityEvery.D(), Log: a.log.With("component", "sandboxmgr")}, labels)
		if err != nil {
			return nil, nil, err
		}
		return rt, rt, nil
	}
	own, err := docker.Own(ctx, docker.OwnOptions{Host: cfg.Docker.Host, DataDir: cfg.DataDir, Labels: labels,
		Lost: func(err error) {
			select {
			case a.errc <- err: // serve ends with it
			default: // serve is ending already
			}
		}}, a.log.With("component", "docker"))
	if err != nil {
		return nil, nil, err
	}
	a.closers = append(a.closers, own.Close)
	// A dead engine is reported in a second rather than the SDK's 10.
	rt, err := docker.New(docker.Options{Host: cfg.Docker.Host, Network: cfg.Docker.Network, DialTimeout: time.Second})
	if err != nil {
		return nil, nil, err
	}
	return rt, own.Records, nil
}

// buildRuntime makes the metrics, the runtime and its records, the sandbox
// manager and the gateway, and starts the manager. Both report to the
// metrics; the gateway listens to the manager (1001 closes, pooled
// connections of a gone instance) and proxies through it.
func (a *App) buildRuntime(ctx context.Context, labels map[string]string) error {
	cfg := a.cfg
	a.store = config.NewStore(cfg)
	a.metrics = metrics.New()
	a.labels = labels
	rt, store, err := a.newRuntime(ctx, labels)
	if err != nil {
		return err
	}
	a.caps = rt.Capabilities()
	mcfg := sandboxmgr.Config{
		Network:             cfg.Docker.Network,
		Labels:              labels,
		MaxConcurrentStarts: cfg.Limits.MaxConcurrentStarts,
		StartQueue:          cfg.Limits.StartQueue,
		StartQueueTimeout:   cfg.Limits.StartQueueTimeout.D(),
		MaxRunning:          cfg.Limits.MaxRunning,
		Templates:           func(name string) *config.Template { return a.store.Load().Templates[name] },
		ListTemplates:       func() []*config.Template { return slices.Collect(maps.Values(a.store.Load().Templates)) },
		Observer:            a.metrics,
	}
	if cfg.Runtime.Kind == config.RuntimeKubernetes {
		mcfg.RecordName = records.Name // a ConfigMap per sandbox id, whatever its scope
	}
	a.recs = records.New(store, records.Options{Labels: runtime.Scoped(labels), RecheckEvery: sandboxmgr.DefaultRecheckEvery,
		LongestWake: mcfg.LongestWake, Log: a.log.With("component", "records")})
	mgr := sandboxmgr.New(mcfg, rt, a.recs, a.log.With("component", "sandboxmgr"))
	a.mgr = mgr
	a.closers = append(a.closers, func() { mgr.Close() })
	tlsOn := cfg.TLS.Mode != config.TLSOff
	replica, _ := os.Hostname() // a pod's name on Kubernetes
	a.traffic = traffic.New(traffic.Options{Replica: replica})
	a.gw, err = gateway.New(cfg, mgr, gateway.Options{TLS: tlsOn, Metrics: a.metrics, Traffic: a.traffic, Records: a.recs}, a.log.With("component", "gateway"))
	if err != nil {
		return err
	}
	mgr.SetListener(a.gw)
	a.metrics.SandboxStates(mgr.States)
	if err := mgr.Start(ctx); err != nil {
		// Keep serving: requests answer 503 until the engine is back.
		a.log.Warn("docker engine not reachable at start", "err", err)
	}
	a.prepareImages(ctx, cfg)
	a.startImageWorker(ctx)
	return nil
}

// buildCerts makes the TLS configs of the listeners.
func (a *App) buildCerts() error {
	cfg := a.cfg
	cm, err := certs.New(certs.Config{
		TLS: cfg.TLS, Domains: cfg.Domains, DataDir: cfg.DataDir,
		HTTPAddr: cfg.Listen.HTTP, HTTPSAddr: cfg.Listen.HTTPS,
		OnEvent: a.metrics.CertEvent,
		// The gateway's live route table decides, so domains and routes
		// added by a reload get certificates too.
		Decide: a.gw.Serves,
		// On demand, only names of sandboxes that exist or were announced
		// (or that tls.acme.ask approves) get a certificate (#24, 7).
		Worth: a.gw.WorthCertificate,
	}, a.log.With("component", "certs"))
	if err != nil {
		return err
	}
	a.certs = cm
	a.closers = append(a.closers, cm.Close)
	return nil
}

// watchConfig reloads the config file when it changes and on SIGHUP, and
// lets the admin API replace it. The development default has no file: a
// SIGHUP is still caught and said to change nothing, since its default
// action would end the gateway without a word.
func (a *App) watchConfig(ctx context.Context) error {
	reload := func() {
		a.log.Info("SIGHUP: nothing to reload: the development default has no config file (serve --config FILE reloads one)")
	}
	if !a.dev {
		w, err := config.NewWatcher(config.WatcherConfig{Path: a.cfg.Path, Store: a.store, Check: CheckFiles,
			Prepare: a.prepare, Override: a.override, OnResult: a.metrics.ReloadResult}, a.log.With("component", "config"))
		if err != nil {
			return err
		}
		a.closers = append(a.closers, func() { w.Close() })
		a.replace = w.Replace
		reload = func() { a.log.Info("SIGHUP: reloading config"); w.Reload() }
	}
	go func() {
		for {
			select {
			case <-a.hup:
				reload()
			case <-ctx.Done():
				return
			}
		}
	}()
	return nil
}

// prepare readies a reloaded config (config.WatcherConfig.Prepare); its
// commit makes it live.
func (a *App) prepare(c *config.Config) (commit, drop func(), err error) {
	gwCommit, drop, err := a.gw.Prepare(c)
	if err != nil {
		return nil, nil, err
	}
	return func() {
		gwCommit()
		a.mgr.SetMaxRunning(c.Limits.MaxRunning)
		// A reload may add the demo template: build its image as start
		// does, in the background.
		a.queueImages(c)
	}, drop, nil
}

// build makes the runtime, the certificates, the config watcher (watch)
// and the listeners, in that order.
func (a *App) build(ctx context.Context, labels map[string]string, watch bool) error {
	if err := a.buildRuntime(ctx, labels); err != nil {
		return err
	}
	if err := a.buildCerts(); err != nil {
		return err
	}
	if watch {
		if err := a.watchConfig(ctx); err != nil {
			return err
		}
	}
	return a.listenAll()
}
