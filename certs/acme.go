package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/previewgate/previewgate/config"
)

// acmeTLS1Protocol is the ALPN protocol of the TLS-ALPN-01 challenge
// (RFC 8737); certmagic answers it from GetCertificate.
const acmeTLS1Protocol = "acme-tls/1"

// ErrIssueRateLimited is the error of an on-demand issuance refused by
// TLS.ACME.IssuePerHour. The CA was not contacted.
var ErrIssueRateLimited = errors.New("certificate issuance rate limited")

// errHostNotAllowed is returned to certmagic for hosts Config.Decide rejects.
var errHostNotAllowed = errors.New("host not allowed")

// acmeSource is tls.mode acme: certmagic with its cache, file storage under
// the data directory, OCSP stapling and background renewal.
type acmeSource struct {
	log    *slog.Logger
	cache  *certmagic.Cache
	magic  *certmagic.Config
	issuer *certmagic.ACMEIssuer
	// wildcards are the names managed up front (strategy wildcard);
	// empty for on-demand.
	wildcards []string
	cancel    context.CancelFunc
}

func newACME(cfg Config, log *slog.Logger) (*acmeSource, error) {
	a := cfg.TLS.ACME
	if len(cfg.Domains) == 0 && a.Strategy == config.StrategyWildcard {
		return nil, errors.New("wildcard strategy needs at least one domain")
	}
	zl := newZapLogger(log)
	tmpl, err := issuerTemplate(cfg, a, zl)
	if err != nil {
		return nil, err
	}
	s := &acmeSource{log: log}
	s.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return s.magic, nil },
		Logger:           zl,
	})
	s.magic = certmagic.New(s.cache, certmagic.Config{
		Storage: &certmagic.FileStorage{Path: filepath.Join(cfg.DataDir, "certmagic")},
		Logger:  zl,
		OnEvent: func(_ context.Context, event string, _ map[string]any) error {
			if cfg.OnEvent != nil {
				cfg.OnEvent(event)
			}
			return nil
		},
		// OCSP stapling stays on (certmagic's default). A certificate
		// without an OCSP responder (Pebble, Let's Encrypt since 2025) is
		// served unstapled; that is logged, never fatal.
	})
	switch a.Strategy {
	case config.StrategyOnDemand:
		s.onDemand(cfg, tmpl)
	case config.StrategyWildcard:
		if err := s.wildcard(cfg, a, tmpl, zl); err != nil {
			s.cache.Stop()
			return nil, err
		}
	default:
		s.cache.Stop()
		return nil, fmt.Errorf("unknown acme strategy %q", a.Strategy)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if len(s.wildcards) > 0 {
		// Async: a DNS server that is down at start must not keep the
		// gateway from starting; certmagic retries with backoff and Ready
		// reports the state.
		if err := s.magic.ManageAsync(ctx, s.wildcards); err != nil {
			s.close()
			return nil, fmt.Errorf("manage %v: %w", s.wildcards, err)
		}
	}
	return s, nil
}

// issuerTemplate is the ACME issuer both strategies start from: the CA,
// its roots, and the gateway's own ports for the challenges.
func issuerTemplate(cfg Config, a config.ACME, zl *zap.Logger) (certmagic.ACMEIssuer, error) {
	var roots *x509.CertPool
	if a.CARoot != "" {
		var err error
		if roots, err = readRoots(a.CARoot); err != nil {
			return certmagic.ACMEIssuer{}, err
		}
	}
	listenHost, httpPort, err := splitPort(cfg.HTTPAddr)
	if err != nil {
		return certmagic.ACMEIssuer{}, fmt.Errorf("http address: %w", err)
	}
	_, httpsPort, err := splitPort(cfg.HTTPSAddr)
	if err != nil {
		return certmagic.ACMEIssuer{}, fmt.Errorf("https address: %w", err)
	}
	return certmagic.ACMEIssuer{
		CA:           a.CA,
		Email:        a.Email,
		Agreed:       true,
		TrustedRoots: roots,
		// The gateway owns both ports: certmagic's own challenge servers
		// fail to bind them and it relies on HTTPHandler (HTTP-01) and
		// TLSConfig (TLS-ALPN-01), which is what we want.
		ListenHost:     listenHost,
		AltHTTPPort:    httpPort,
		AltTLSALPNPort: httpsPort,
		Logger:         zl,
	}, nil
}

// onDemand issues a certificate at the first handshake for a host
// cfg.Decide approves, within the issuance rate.
func (s *acmeSource) onDemand(cfg Config, tmpl certmagic.ACMEIssuer) {
	decide, worth := cfg.Decide, cfg.Worth
	ask := newAsker(cfg.TLS.ACME.Ask)
	s.magic.OnDemand = &certmagic.OnDemandConfig{
		DecisionFunc: func(ctx context.Context, name string) error {
			if !decide(name) {
				return fmt.Errorf("%w: %q", errHostNotAllowed, name)
			}
			// A well-formed name is not enough: anyone could make up ids
			// and spend the CA's budget for the domain (#24, 7).
			if worth == nil || worth(name) {
				return nil
			}
			if ask != nil {
				return ask.approve(ctx, name)
			}
			return fmt.Errorf("%w: %q: no such sandbox (announce it first, or set tls.acme.ask)", errHostNotAllowed, name)
		},
	}
	s.issuer = certmagic.NewACMEIssuer(s.magic, tmpl)
	// The limit sits on the issuer, not in DecisionFunc: certmagic asks
	// the decision before loading a stored certificate too, and a
	// restart must not spend the issuance budget on reloading.
	s.magic.Issuers = []certmagic.Issuer{&limitedIssuer{
		ACMEIssuer: s.issuer,
		budget:     &hourly{max: cfg.TLS.ACME.IssuePerHour, now: time.Now},
	}}
}

// wildcard obtains *.<domain> for every domain up front over DNS-01 (RFC
// 2136 updates).
func (s *acmeSource) wildcard(cfg Config, a config.ACME, tmpl certmagic.ACMEIssuer, zl *zap.Logger) error {
	prov, err := NewRFC2136(a.RFC2136)
	if err != nil {
		return err
	}
	tmpl.DisableHTTPChallenge = true
	tmpl.DisableTLSALPNChallenge = true
	tmpl.DNS01Solver = &certmagic.DNS01Solver{DNSManager: certmagic.DNSManager{
		DNSProvider: prov,
		TTL:         time.Minute,
		// Check propagation on the server we updated: it is the primary,
		// and it is reachable even when the zone's public NS records
		// point elsewhere.
		Resolvers: []string{prov.Server},
		Logger:    zl,
	}}
	s.issuer = certmagic.NewACMEIssuer(s.magic, tmpl)
	s.magic.Issuers = []certmagic.Issuer{s.issuer}
	for _, d := range cfg.Domains {
		s.wildcards = append(s.wildcards, "*."+normalizeHost(d))
	}
	return nil
}

func (s *acmeSource) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.magic.GetCertificate(hello)
}

func (s *acmeSource) handleHTTP(w http.ResponseWriter, r *http.Request) bool {
	return s.issuer.HandleHTTPChallenge(w, r)
}

func (s *acmeSource) ready() error {
	for _, name := range s.wildcards {
		if len(s.cache.AllMatchingCertificates(name)) == 0 {
			return fmt.Errorf("%w: %s not obtained yet", ErrNotReady, name)
		}
	}
	return nil
}

func (s *acmeSource) close() {
	s.cancel()
	s.cache.Stop()
}

// limitedIssuer spends one token of lim per certificate order. Embedding
// keeps the ACMEIssuer's other methods (PreCheck, Revoke, IssuerKey), so
// certificates stay under the same storage key.
type limitedIssuer struct {
	*certmagic.ACMEIssuer
	budget *hourly
}

func (l *limitedIssuer) Issue(ctx context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	if !l.budget.take() {
		// No retry: certmagic would otherwise hold the handshake for
		// minutes of backoff. Renewals are retried at the next
		// maintenance tick anyway.
		return nil, certmagic.ErrNoRetry{Err: ErrIssueRateLimited}
	}
	return l.ACMEIssuer.Issue(ctx, csr)
}

func splitPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := net.LookupPort("tcp", p)
	if err != nil {
		return "", 0, fmt.Errorf("port of %q: %w", addr, err)
	}
	return host, port, nil
}
