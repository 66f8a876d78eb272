package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/previewgate/previewgate/auth"
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

// serve: the gateway process, built in steps (app) and drained on a signal.

func serve(args []string, stdout, stderr io.Writer) error {
	// SIGHUP is caught from the start: its default action ends the
	// process (and systemd does not restart a process SIGHUP ended), and
	// a reload can come during a slow start (image builds, adoption). One
	// that does is taken once the config is watched (watchConfig).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	f, err := parseServeFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	cfg, dev, err := loadServeConfig(f.config)
	if err != nil && f.configFromEnv {
		return configEnvError(f.config, err)
	}
	if err != nil {
		return err
	}
	f.apply(cfg)
	if f.domain != "" {
		// The file was validated before the flag replaced its domain.
		if p := config.DomainProblems(cfg); len(p) > 0 {
			return fmt.Errorf("--domain %s: %s", f.domain, strings.Join(p, "; "))
		}
	}
	log := newLogger(cfg.Log, stderr)
	labels := f.labels
	switch {
	case labels[runtime.LabelInstance] != "":
	case cfg.Scope != "":
		// Replicas sharing the file share the scope (#21).
		labels[runtime.LabelInstance] = cfg.Scope
		log.Info("gateway scope from the config", "label", runtime.LabelInstance+"="+cfg.Scope)
	case dev:
		if err := scopeToDataDir(cfg, labels, log); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	a := &app{cfg: cfg, dev: dev, log: log, errc: make(chan error, 3), override: f.apply, hup: hup}
	defer a.close()
	if err := a.buildRuntime(ctx, labels); err != nil {
		return err
	}
	if err := a.buildCerts(); err != nil {
		return err
	}
	if err := a.watchConfig(ctx); err != nil {
		return err
	}
	if err := a.listenAll(); err != nil {
		return err
	}
	// The file is said: $PREVIEWGATE_CONFIG may have chosen it.
	log.Info("previewgate serving", "config", cmp.Or(cfg.Path, "embedded development default"), "domains", []string(cfg.Domains), "tls", cfg.TLS.Mode, "version", version)
	if cfg.Runtime.Kind == "" || cfg.Runtime.Kind == config.RuntimeDocker {
		// Said at start: with several replicas and the default of 1, a
		// replica stops sandboxes busy on the others.
		signal := "this replica's requests and sockets"
		if cfg.Docker.Replicas > 1 {
			signal = "containers' network counters too"
		}
		log.Info("docker runtime", "replicas", cfg.Docker.Replicas, "idle_signal", signal)
	}
	printListeners(stdout, cfg)
	if dev {
		if err := writeDevListen(cfg); err != nil {
			log.Warn("token mint will print URLs on the default port", "err", err)
		}
		printDevURL(stdout, cfg)
	}
	select {
	case <-ctx.Done():
	case err := <-a.errc:
		return err
	}
	a.drain()
	return nil
}

// loadServeConfig loads path, or with no path makes the development
// default (dev is then true): its signing key kept in its data dir, so
// links survive a restart, and a fresh admin token.
func loadServeConfig(path string) (cfg *config.Config, dev bool, err error) {
	if path != "" {
		if cfg, err = config.Load(path); err == nil {
			err = checkFiles(cfg)
		}
		if err != nil {
			return nil, false, err
		}
		return cfg, false, nil
	}
	cfg = config.Default()
	key, err := devKey(cfg.DataDir)
	if err != nil {
		return nil, true, err
	}
	cfg.Auth.Keys = []config.Key{key}
	cfg.AdminToken = config.Secret(randomToken())
	cfg.KeepCodeSecrets() // the admin page's copy then validates as shown
	return cfg, true, nil
}

// checkFiles reports, each at its key in the file, what the files cfg
// names (verification and signing keys, certificates) would make the
// gateway refuse: the reads serve makes, so that `config validate`, a
// reload, the config API and serve agree on a config.
func checkFiles(cfg *config.Config) error {
	return cfg.Locate(append(auth.KeyFileProblems(cfg.Auth), certs.FileProblems(cfg.TLS)...))
}

// scopeToDataDir labels a development gateway's containers with the id
// kept in its data dir (serve calls it unless --label or the config's
// scope set one).
func scopeToDataDir(cfg *config.Config, labels labelFlag, log *slog.Logger) error {
	// Without it a development gateway would own every previewgate
	// container on the engine, another developer's gateway's too (#13).
	inst, err := devInstanceID(cfg.DataDir)
	if err != nil {
		return err
	}
	labels[runtime.LabelInstance] = inst
	log.Info("development gateway scoped to its data dir", "label", runtime.LabelInstance+"="+inst, "data_dir", cfg.DataDir)
	return nil
}

// app is one running gateway: what serve builds, in the order it builds
// it, and how it stops.
type app struct {
	cfg *config.Config
	dev bool // the embedded development default: no file to watch
	log *slog.Logger
	// override puts serve's flags into a config read from the file.
	override func(*config.Config)

	store   *config.Store
	metrics *metrics.Metrics
	labels  map[string]string    // the gateway's scope (--label, config scope)
	caps    runtime.Capabilities // what the runtime can do beyond the manager's verbs
	images  runtime.Images       // caps.Images: nil where the runtime pulls
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
}

// close releases what was built, last built first.
func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
}

// newRuntime makes the runtime cfg names (lazily: it does not fail when
// the Docker engine or the API server is down), and the store that keeps
// its sandboxes' records.
func newRuntime(cfg *config.Config, labels map[string]string, log *slog.Logger) (runtime.Runtime, records.Store, error) {
	if cfg.Runtime.Kind == config.RuntimeKubernetes {
		rk := cfg.Runtime.Kubernetes
		rt, err := kube.New(kube.Config{Namespace: rk.Namespace, Kubeconfig: rk.Kubeconfig, InCluster: rk.InCluster,
			GatewayLabels: rk.Labels(), GatewayNamespace: rk.GatewayNamespace, GatewayCIDRs: rk.GatewayCIDRs,
			Egress: rk.Egress, EgressAllow: rk.EgressAllow,
			RunAsUser: rk.RunAsUser, ActivityEvery: rk.ActivityEvery.D(), Log: log}, labels)
		if err != nil {
			return nil, nil, err
		}
		return rt, rt, nil
	}
	// A dead engine is reported in a second rather than the SDK's 10.
	rt, err := docker.New(docker.Options{Host: cfg.Docker.Host, Network: cfg.Docker.Network, DialTimeout: time.Second, Replicas: cfg.Docker.Replicas})
	if err != nil {
		return nil, nil, err
	}
	return rt, rt, nil
}

// buildRuntime makes the metrics, the runtime and its records, the sandbox
// manager and the gateway, and starts the manager. Both report to the
// metrics; the gateway listens to the manager (1001 closes, pooled
// connections of a gone instance) and proxies through it.
func (a *app) buildRuntime(ctx context.Context, labels labelFlag) error {
	cfg := a.cfg
	a.store = config.NewStore(cfg)
	a.metrics = metrics.New()
	a.labels = labels
	rt, store, err := newRuntime(cfg, labels, a.log.With("component", "sandboxmgr"))
	if err != nil {
		return err
	}
	a.caps = rt.Capabilities()
	a.images = a.caps.Images
	mcfg := sandboxmgr.Config{
		Network:             cfg.Docker.Network,
		Labels:              labels,
		MaxConcurrentStarts: cfg.Limits.MaxConcurrentStarts,
		StartQueue:          cfg.Limits.StartQueue,
		StartQueueTimeout:   cfg.Limits.StartQueueTimeout.D(),
		MaxRunning:          cfg.Limits.MaxRunning,
		Templates:           func(name string) *config.Template { return a.store.Load().Templates[name] },
		ListTemplates: func() []*config.Template {
			var out []*config.Template
			for _, t := range a.store.Load().Templates {
				out = append(out, t)
			}
			return out
		},
		Observer: a.metrics,
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
func (a *app) buildCerts() error {
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
func (a *app) watchConfig(ctx context.Context) error {
	reload := func() {
		a.log.Info("SIGHUP: nothing to reload: the development default has no config file (serve --config FILE reloads one)")
	}
	if !a.dev {
		w, err := config.NewWatcher(config.WatcherConfig{Path: a.cfg.Path, Store: a.store, Check: checkFiles,
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
func (a *app) prepare(c *config.Config) (commit, drop func(), err error) {
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
