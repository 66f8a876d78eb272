package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/gateway"
	"github.com/previewgate/previewgate/internal/boltstore"
	"github.com/previewgate/previewgate/internal/h1server"
	"github.com/previewgate/previewgate/metrics"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	sbruntime "github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The gateway under test: started in-process against the test app
// container, plain and TLS.

// benchConfig is the gateway's config for the bench: limits far above the
// load, a signing key of its own, the test app template and a pooled one.
func (b *bench) benchConfig() (*config.Config, config.Key) {
	key := config.Key{KID: "bench", Alg: "HS256", Secret: config.Secret(base64.RawURLEncoding.EncodeToString([]byte(randHex(32))))}
	huge := &config.Rate{Rate: 1e9, Burst: 1e9}
	// The testapp pushes on its WebSockets hourly: the rows' sockets stay idle.
	tpl := func(image string, env map[string]string, pool int) *config.Template {
		return &config.Template{Image: image, Env: env, Memory: 4 << 30, CPUs: float64(runtime.NumCPU()),
			Pids: 4096, ColdStart: config.ColdStartBlock, Pool: pool}
	}
	cfg := &config.Config{
		Domains: config.StringList{b.domain},
		Auth:    config.Auth{Issuers: []string{"bench"}, Keys: []config.Key{key}},
		Docker:  config.Docker{Network: b.netName},
		Templates: map[string]*config.Template{"testapp": tpl(b.image, map[string]string{"WS_PUSH": "1h"}, 0),
			"vite": tpl(b.viteImage, nil, 0), "pooled": tpl(b.image, map[string]string{"WS_PUSH": "1h"}, poolSize)},
		DefaultTemplate: "testapp",
		Limits: config.Limits{
			RateLimits: config.RateLimits{PerIP: huge, PerSandbox: huge, PerSubject: huge},
			MaxRunning: 1000, WebSocketsPerSandbox: 1 << 20, WebSocketsPerIP: 1 << 20,
			ConnectionsPerIP: 1 << 20, MaxConnections: 1 << 20, // every load client is 127.0.0.1
		},
		Log: config.Log{Level: "error"},
	}
	cfg.ApplyDefaults()
	return cfg, key
}

// startGateway runs the gateway in this process: a real manager, an HS256
// key, the test app templates, limits on but far above the load (so they
// are evaluated on every request and never reject), plain and TLS
// listeners on 127.0.0.1. It creates the "bench" sandbox through it.
func (b *bench) startGateway(labels map[string]string) error {
	cfg, key := b.benchConfig()
	b.tpl = cfg.Templates["testapp"]
	b.poolTpl = cfg.Templates["pooled"]
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if err := b.startManager(cfg, labels, log); err != nil {
		return err
	}
	if err := b.mintTokens(key); err != nil {
		return err
	}
	cert, err := b.writeCert()
	if err != nil {
		return err
	}
	modes := []string{"plain", "tls"}
	if b.f.h2Baseline {
		modes = append(modes, "h2baseline")
	}
	for _, mode := range modes {
		if err := b.serveGateway(cfg, mode, cert, log); err != nil {
			return err
		}
	}
	logf("gateway on %s (TLS %s); creating the sandbox", b.gwPlain, b.gwTLS)
	if err := b.get(b.gwPlain, b.host, "/"); err != nil {
		return fmt.Errorf("first request through the gateway: %w", err)
	}
	return b.createSandboxes(cfg)
}

// startManager starts the sandbox manager on cfg's templates; the pooled
// template is listed (so its pool is kept filled) only while poolOn.
func (b *bench) startManager(cfg *config.Config, labels map[string]string, log *slog.Logger) error {
	rt, err := docker.New(docker.Options{Network: b.netName, DialTimeout: time.Second})
	if err != nil {
		return fmt.Errorf("sandbox runtime: %w", err)
	}
	mcfg := sandboxmgr.Config{
		Network: b.netName, Labels: labels, MaxRunning: 1000,
		MaxConcurrentStarts: cfg.Limits.MaxConcurrentStarts,
		Templates:           func(name string) *config.Template { return cfg.Templates[name] },
		ListTemplates: func() []*config.Template {
			if b.poolOn.Load() {
				return []*config.Template{b.poolTpl}
			}
			return nil
		},
		Observer: &b.kinds,
	}
	// Records in a store in the bench's directory, as serve keeps them in
	// its data dir: the request path reads their cache.
	if b.store, err = boltstore.Open(b.ctx, b.dir, log); err != nil {
		return fmt.Errorf("records store: %w", err)
	}
	b.recs = records.New(b.store, records.Options{Labels: sbruntime.Scoped(labels), RecheckEvery: sandboxmgr.DefaultRecheckEvery, LongestWake: mcfg.LongestWake})
	b.mgr = sandboxmgr.New(mcfg, rt, b.recs, log)
	if err := b.mgr.Start(b.ctx); err != nil {
		return fmt.Errorf("sandbox manager: %w", err)
	}
	return nil
}

// mintTokens mints the load's tokens with key: any sandbox on the default
// template, on the pooled one and on the vite one, and the cookies that
// carry the first.
func (b *bench) mintTokens(key config.Key) error {
	for template, tok := range map[string]*string{"": &b.token, "pooled": &b.tokenPool, "vite": &b.tokenVite} {
		var err error
		*tok, err = auth.Mint(key, auth.MintOptions{Subject: "bench", Sandbox: "*", Template: template, Issuer: "bench", TTL: time.Hour})
		if err != nil {
			return fmt.Errorf("mint a bench token (template %q): %w", template, err)
		}
	}
	b.cookie = "previewgate_token=" + b.token
	b.cookieS = "__Host-previewgate_token=" + b.token
	return nil
}

// serveGateway starts one gateway for mode ("plain", "tls" or
// "h2baseline") on a 127.0.0.1 listener and records its address.
func (b *bench) serveGateway(cfg *config.Config, mode string, cert tls.Certificate, log *slog.Logger) error {
	tlsOn := mode != "plain"
	// Real metrics, as serve has: the request path pays for them.
	gw, err := gateway.New(cfg, b.mgr, gateway.Options{TLS: tlsOn, Metrics: metrics.New(), NetHTTPOnly: b.f.netHTTP, Records: b.recs}, log)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	srv := gateway.NewServer(cfg, gw, log)
	if mode == "h2baseline" {
		// The HTTP/2 path as it was before #17: the server's body
		// reader on every request.
		srv = h1server.New(gateway.ServerOptions(cfg.Limits), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && r.Body == http.NoBody {
				r.Body = io.NopCloser(http.NoBody)
			}
			gw.ServeHTTP(w, r)
		}), log)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("gateway listener (%s): %w", mode, err)
	}
	switch {
	case !tlsOn:
		b.gwPlain = ln.Addr().String()
	case mode == "h2baseline":
		b.gwBaseline = ln.Addr().String()
	default:
		b.gwTLS = ln.Addr().String()
	}
	if tlsOn {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
			NextProtos: []string{"h2", "http/1.1"}}
	}
	go srv.Serve(ln)
	return nil
}

// createSandboxes creates the bench sandbox (and the vite one, if the
// bench has a vite image) and records their direct addresses.
func (b *bench) createSandboxes(cfg *config.Config) error {
	ep, err := b.mgr.Ensure(b.ctx, "bench", b.tpl)
	if err != nil {
		return fmt.Errorf("bench sandbox: %w", err)
	}
	b.direct = ep.Addr
	if b.viteImage != "" {
		if ep, err = b.mgr.Ensure(b.ctx, "vite", cfg.Templates["vite"]); err != nil {
			return fmt.Errorf("vite sandbox: %w", err)
		}
		b.viteDirect = ep.Addr
	}
	return nil
}

// writeCert makes the wildcard certificate the TLS rows use and writes it
// (for nginx and the load generators) to the bench directory.
func (b *bench) writeCert() (tls.Certificate, error) {
	certPEM, keyPEM, err := selfSigned("*." + b.domain)
	if err != nil {
		return tls.Certificate{}, err
	}
	b.caFile = filepath.Join(b.dir, "cert.pem")
	if err := os.WriteFile(b.caFile, certPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(filepath.Join(b.dir, "key.pem"), keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// get sends one GET with the plain cookie and checks for 200.
func (b *bench) get(addr, host, path string) error {
	req, _ := http.NewRequestWithContext(b.ctx, "GET", "http://"+addr+path, nil)
	req.Host = host
	req.Header.Set("Cookie", b.cookie)
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func selfSigned(names ...string) (certPEM, keyPEM []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "previewgate bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: names, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}
