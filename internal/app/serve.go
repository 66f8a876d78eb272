// Package app builds a running gateway from a config: the sandbox
// runtime and manager, the gateway, the admin API, certificates and the
// listeners; it reloads the config when its file changes and on SIGHUP,
// and drains on SIGINT or SIGTERM. The development default (no file) is
// made here too: its signing key and instance id kept in its data dir,
// the demo image built from this binary.
//
// It is wiring only. It must never hold a rule of its own (routing,
// access, limits, hosts, algorithms belong to the packages it wires;
// config's rules.go holds the one definition), never talk to Docker,
// Kubernetes or a CA except through the runtime it makes
// (sandboxmgr/docker, sandboxmgr/kube) and certs, never read the
// environment (the CLI hands it Options), and never overwrite a file
// (the development key and instance id are only ever created, O_EXCL).
package app

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/certs"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Options are serve's command line as the CLI read it.
type Options struct {
	// ConfigPath is the config file; "" runs the embedded development
	// default.
	ConfigPath string
	// ExplainLoad wraps a failure to read ConfigPath, saying where the
	// path came from (an environment variable); nil leaves it as it is.
	ExplainLoad func(error) error
	// Overrides are the listener and domain flags: they win over the
	// development default and over the file, also on its reloads.
	Overrides Overrides
	// Labels go on every container, network and image the gateway
	// creates; it then adopts only containers carrying them.
	Labels map[string]string
	// Version is said at start; Invoked is the command as the user ran
	// it, for the hints printed.
	Version, Invoked string
	Stdout, Stderr   io.Writer
}

// Serve runs the gateway until SIGINT or SIGTERM, then drains it; an
// error when it cannot start or a listener fails.
func Serve(o Options) error {
	// SIGHUP is caught from the start: its default action ends the
	// process (and systemd does not restart a process SIGHUP ended), and
	// a reload can come during a slow start (image builds, adoption). One
	// that does is taken once the config is watched (watchConfig).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, dev, err := Load(o.ConfigPath)
	if err != nil && o.ExplainLoad != nil {
		return o.ExplainLoad(err)
	}
	if err != nil {
		return err
	}
	o.Overrides.Apply(cfg)
	if d := o.Overrides.Domain; d != "" {
		// The file was validated before the flag replaced its domain.
		if p := config.DomainProblems(cfg); len(p) > 0 {
			return fmt.Errorf("--domain %s: %s", d, strings.Join(p, "; "))
		}
	}
	log := newLogger(cfg.Log, o.Stderr)
	labels, err := scope(cfg, dev, o.Labels, log)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	a := &App{cfg: cfg, dev: dev, log: log, errc: make(chan error, 3), override: o.Overrides.Apply, hup: hup, invoked: o.Invoked}
	defer a.close()
	if err := a.build(ctx, labels, true); err != nil {
		if ctx.Err() != nil {
			return nil // a signal while starting (a standby waiting): a clean stop
		}
		return err
	}
	// The file is said: $PREVIEWGATE_CONFIG may have chosen it.
	log.Info("previewgate serving", "config", cmp.Or(cfg.Path, "embedded development default"), "domains", []string(cfg.Domains), "tls", cfg.TLS.Mode, "version", o.Version)
	printListeners(o.Stdout, cfg)
	if dev {
		if err := writeDevListen(cfg); err != nil {
			log.Warn("token mint will print URLs on the default port", "err", err)
		}
		a.printDevURL(o.Stdout)
	}
	select {
	case <-ctx.Done():
	case err := <-a.errc:
		return err
	}
	a.drain()
	return nil
}

// Start builds a gateway from cfg as Serve does (runtime, certificates,
// listeners), without watching the file or catching signals, for a test
// that runs a gateway in its process. labels scope it as Serve's. Stop
// ends it.
func Start(ctx context.Context, cfg *config.Config, labels map[string]string, log *slog.Logger) (*App, error) {
	a := &App{cfg: cfg, log: log, errc: make(chan error, 3), override: func(*config.Config) {}}
	if err := a.build(ctx, labels, false); err != nil {
		a.Stop()
		return nil, err
	}
	return a, nil
}

// Stop drains what Start built and releases it.
func (a *App) Stop() {
	if a.gw != nil {
		a.drain()
	}
	a.close()
}

// Overrides are serve's listener and domain flags; "" keeps the
// config's.
type Overrides struct {
	HTTP, HTTPS, Admin, Domain string
}

// Apply puts the overrides into c.
func (o Overrides) Apply(c *config.Config) {
	for _, s := range []struct {
		v string
		p *string
	}{{o.HTTP, &c.Listen.HTTP}, {o.HTTPS, &c.Listen.HTTPS}, {o.Admin, &c.Listen.Admin}} {
		if s.v != "" {
			*s.p = s.v
		}
	}
	if o.Domain != "" {
		c.Domains = config.StringList{o.Domain}
	}
}

// scope returns the labels the gateway puts on what it creates: those
// given, with the scope label from the config's scope unless they carry
// one, and for the development default the id kept in its data dir.
func scope(cfg *config.Config, dev bool, given map[string]string, log *slog.Logger) (map[string]string, error) {
	labels := maps.Clone(given)
	if labels == nil {
		labels = map[string]string{}
	}
	switch {
	case labels[runtime.LabelInstance] != "":
	case cfg.Scope != "":
		// Replicas sharing the file share the scope (#21).
		labels[runtime.LabelInstance] = cfg.Scope
		log.Info("gateway scope from the config", "label", runtime.LabelInstance+"="+cfg.Scope)
	case dev:
		// Without it a development gateway would own every previewgate
		// container on the engine, another developer's gateway's too (#13).
		inst, err := devInstanceID(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		labels[runtime.LabelInstance] = inst
		log.Info("development gateway scoped to its data dir", "label", runtime.LabelInstance+"="+inst, "data_dir", cfg.DataDir)
	}
	return labels, nil
}

// Load loads the config file at path, or with no path makes the
// development default (dev is then true): its signing key kept in its
// data dir, so links survive a restart, and a fresh admin token.
func Load(path string) (cfg *config.Config, dev bool, err error) {
	if path != "" {
		if cfg, err = config.Load(path); err == nil {
			err = CheckFiles(cfg)
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

// CheckFiles reports, each at its key in the file, what the files cfg
// names (verification and signing keys, certificates) would make the
// gateway refuse: the reads serve makes, so that `config validate`, a
// reload, the config API and serve agree on a config.
func CheckFiles(cfg *config.Config) error {
	return cfg.Locate(append(auth.KeyFileProblems(cfg.Auth), certs.FileProblems(cfg.TLS)...))
}

// randomToken is a fresh bearer token: 24 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
