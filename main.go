// Command previewgate is a preview gateway: it terminates TLS for
// sandbox-<id>.<domain>, checks access tokens, wakes the sandbox's container
// and reverse-proxies to it. See README.md.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/certs"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/demoapp"
	"github.com/previewgate/previewgate/gateway"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `previewgate — a gateway in front of development sandboxes

usage:
  previewgate serve [--config FILE]       run the gateway (no file: development default)
  previewgate config validate FILE        check a config file
  previewgate token mint --sandbox ID [--ttl 15m] [--template NAME] [--subject WHO] [--config FILE]
  previewgate ca export [--config FILE]   print the local CA (tls.mode self-signed)
  previewgate healthcheck [--url URL]     exit 0 if the admin /healthz answers (container health checks)
  previewgate version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd := args[0]; {
	case cmd == "serve":
		err = serve(args[1:], stdout, stderr)
	case cmd == "config" && len(args) > 1 && args[1] == "validate":
		return validate(args[2:], stdout, stderr)
	case cmd == "token" && len(args) > 1 && args[1] == "mint":
		err = mint(args[2:], stdout, stderr)
	case cmd == "ca" && len(args) > 1 && args[1] == "export":
		err = caExport(args[2:], stdout, stderr)
	case cmd == "healthcheck":
		err = healthcheck(args[1:], stderr)
	case cmd == "version":
		fmt.Fprintln(stdout, "previewgate", version)
	case cmd == "demo-app":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = demoapp.Serve(ctx, ":3000", slog.New(slog.NewTextHandler(stderr, nil)))
	case cmd == "help" || cmd == "-h" || cmd == "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "previewgate: unknown command %q\n\n%s", strings.Join(args, " "), usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "previewgate:", err)
		return 1
	}
	return 0
}

func validate(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: previewgate config validate FILE")
		return 2
	}
	if _, err := config.Load(args[0]); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stdout, args[0]+": ok")
	return 0
}

func mint(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token mint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sandbox := fs.String("sandbox", "", "sandbox id, or * for all (required)")
	ttl := fs.Duration("ttl", 15*time.Minute, "token lifetime")
	tpl := fs.String("template", "", "template to create the sandbox from")
	sub := fs.String("subject", "cli", "who the token is for (sub)")
	kid := fs.String("kid", "", "key to sign with (default: the first key that can sign)")
	cfgPath := fs.String("config", "", "config file (its auth keys sign the token)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sandbox == "" || (*sandbox != "*" && !config.ValidID(*sandbox)) {
		return errors.New("token mint: --sandbox must be a valid sandbox id or *")
	}
	if *cfgPath == "" {
		return errors.New("token mint: --config is required (the development default uses a per-run key; serve prints a token)")
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	key, err := signingKey(cfg, *kid)
	if err != nil {
		return err
	}
	iss := ""
	if len(cfg.Auth.Issuers) > 0 {
		iss = cfg.Auth.Issuers[0]
	}
	tok, err := auth.Mint(key, auth.MintOptions{Subject: *sub, Sandbox: *sandbox, Template: *tpl,
		Issuer: iss, Audience: cfg.Auth.Audience, TTL: *ttl})
	if err != nil {
		return fmt.Errorf("token mint: %w", err)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// signingKey picks the key named kid, or the first one able to sign.
func signingKey(cfg *config.Config, kid string) (config.Key, error) {
	for _, k := range cfg.Auth.Keys {
		if kid != "" && k.KID != kid {
			continue
		}
		if k.Secret != "" || k.PrivateKeyFile != "" {
			return k, nil
		}
	}
	return config.Key{}, errors.New("token mint: no key in the config can sign (need a secret or private_key_file)")
}

func serve(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (default: the embedded development setup)")
	labels := labelFlag{}
	fs.Var(labels, "label", "extra `key=value` label on every container, network and image this gateway creates (repeatable); it then also only adopts containers carrying them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg *config.Config
	dev := *cfgPath == ""
	if dev {
		cfg = config.Default()
		cfg.Auth.Keys = []config.Key{auth.NewDevKey()}
		cfg.AdminToken = config.Secret(randomToken())
	} else {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	log := newLogger(cfg.Log, stderr)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	store := config.NewStore(cfg)
	// The manager reports to the gateway (1001 closes, metrics), the gateway
	// proxies through the manager: build both, then start the manager.
	var gw *gateway.Gateway
	tlsOn := cfg.TLS.Mode != config.TLSOff
	mgr, err := sandboxmgr.New(sandboxmgr.Config{
		Host:                cfg.Docker.Host,
		Network:             cfg.Docker.Network,
		Labels:              labels,
		MaxConcurrentStarts: cfg.Limits.MaxConcurrentStarts,
		StartQueue:          cfg.Limits.StartQueue,
		StartQueueTimeout:   cfg.Limits.StartQueueTimeout.D(),
		MaxRunning:          cfg.Limits.MaxRunning,
		Templates:           func(name string) *config.Template { return store.Load().Templates[name] },
		ListTemplates: func() []*config.Template {
			var out []*config.Template
			for _, t := range store.Load().Templates {
				out = append(out, t)
			}
			return out
		},
		BeforeStop:  func(id string) { gw.CloseSockets(id) },
		OnColdStart: func(kind string, took time.Duration) { gw.ColdStart(kind, took) },
	}, log.With("component", "sandboxmgr"))
	if err != nil {
		return err
	}
	defer mgr.Close()
	gw, err = gateway.New(cfg, mgr, gateway.Options{TLS: tlsOn}, log.With("component", "gateway"))
	if err != nil {
		return err
	}
	gw.SandboxStates(mgr.States)
	if err := mgr.Start(ctx); err != nil {
		// Keep serving: requests answer 503 until the engine is back.
		log.Warn("docker engine not reachable at start", "err", err)
	}
	if dev {
		if err := ensureDemoImage(ctx, mgr, log); err != nil {
			log.Warn("demo image not available", "err", err)
		}
	}

	cm, err := certs.New(certs.Config{
		TLS: cfg.TLS, Domains: cfg.Domains, DataDir: cfg.DataDir,
		HTTPAddr: cfg.Listen.HTTP, HTTPSAddr: cfg.Listen.HTTPS,
		OnEvent: gw.CertEvent,
		// The gateway's live route table decides, so domains and routes
		// added by a reload get certificates too.
		Decide: gw.Serves,
	}, log.With("component", "certs"))
	if err != nil {
		return err
	}
	defer cm.Close()

	var replace func([]byte) ([]string, error)
	if !dev {
		w, err := config.NewWatcher(config.WatcherConfig{Path: cfg.Path, Store: store, Apply: func(c *config.Config) error {
			if err := gw.Apply(c); err != nil {
				return err
			}
			mgr.SetMaxRunning(c.Limits.MaxRunning)
			return nil
		},
			OnResult: gw.ReloadResult}, log.With("component", "config"))
		if err != nil {
			return err
		}
		defer w.Close()
		replace = w.Replace
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for {
				select {
				case <-hup:
					log.Info("SIGHUP: reloading config")
					w.Reload()
				case <-ctx.Done():
					return
				}
			}
		}()
	}

	var servers []*gateway.Server
	errc := make(chan error, 3)
	listen := func(name, addr string, h http.Handler, tc *tls.Config) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen %s %s: %w", name, addr, err)
		}
		srv := gateway.NewServer(cfg, h, log)
		srv.TLSConfig = tc
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s listener: %w", name, err)
			}
		}()
		log.Info("listening", "listener", name, "addr", ln.Addr().String())
		return nil
	}
	admin := gateway.NewAdmin(gateway.AdminOptions{Config: store.Load, Replace: replace, Sandboxes: mgr,
		Ready: func(context.Context) error { return cm.Ready() }, Metrics: gw.MetricsHandler(),
		Log: log.With("component", "admin")})
	if err := listen("admin", cfg.Listen.Admin, admin, nil); err != nil {
		return err
	}
	if tlsOn {
		if err := listen("https", cfg.Listen.HTTPS, gw, cm.TLSConfig()); err != nil {
			return err
		}
		if err := listen("http", cfg.Listen.HTTP, cm.HTTPHandler(gw), nil); err != nil {
			return err
		}
	} else if err := listen("http", cfg.Listen.HTTP, gw, nil); err != nil {
		return err
	}
	log.Info("previewgate serving", "domains", []string(cfg.Domains), "tls", cfg.TLS.Mode, "version", version)
	if dev {
		printDevURL(stdout, cfg)
	}

	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	log.Info("shutting down: draining requests", "grace", shutdownGrace)
	shutCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Upgraded connections are not waited for by Shutdown: the gateway closes
	// them with 1001 while the servers finish in-flight requests.
	go gw.Close()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() { srv.Shutdown(shutCtx) })
	}
	wg.Wait()
	gw.Close()
	log.Info("stopped; containers keep running")
	return nil
}

// shutdownGrace bounds how long in-flight requests may finish on SIGTERM.
const shutdownGrace = 25 * time.Second

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func printDevURL(w io.Writer, cfg *config.Config) {
	_, port, _ := net.SplitHostPort(cfg.Listen.HTTP)
	tok, err := auth.Mint(cfg.Auth.Keys[0], auth.MintOptions{Subject: "dev", Sandbox: "demo",
		Issuer: cfg.Auth.Issuers[0], Audience: cfg.Auth.Audience, TTL: 12 * time.Hour})
	if err != nil {
		fmt.Fprintln(w, "cannot mint a development token:", err)
		return
	}
	fmt.Fprintf(w, "\nOpen the demo preview (token valid 12h):\n\n  http://sandbox-demo.%s:%s/?access_token=%s\n\n", cfg.Domains[0], port, tok)
	fmt.Fprintf(w, "Admin API on http://%s (this run's admin token: %s)\n\n", cfg.Listen.Admin, string(cfg.AdminToken))
}

// ensureDemoImage builds the demo template's image from this very binary
// when the engine does not have it yet.
func ensureDemoImage(ctx context.Context, mgr *sandboxmgr.Manager, log *slog.Logger) error {
	ok, err := mgr.HasImage(ctx, config.DemoImage)
	if err != nil || ok {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	tarball, err := demoapp.BuildContext(exe)
	if err != nil {
		return err
	}
	log.Info("building demo image", "image", config.DemoImage)
	return mgr.BuildImage(ctx, config.DemoImage, tarball)
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String()) // "1.2s", not nanoseconds
		}
		return a
	}}
	format := c.Format
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func caExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ca export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (its data_dir holds the CA)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := config.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	pem, err := certs.ExportCA(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("ca export: %w", err)
	}
	_, err = stdout.Write(pem)
	return err
}

func healthcheck(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://"+config.DevListenAdmin+"/healthz", "health endpoint")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(*url)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", *url, resp.Status)
	}
	return nil
}

// labelFlag collects repeated --label key=value flags.
type labelFlag map[string]string

func (l labelFlag) String() string { return fmt.Sprint(map[string]string(l)) }

func (l labelFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q: want key=value", v)
	}
	l[k] = val
	return nil
}
