// Package certs supplies the tls.Config of the HTTPS listener and the handler
// of the plain HTTP listener, for one of four modes (config.TLS.Mode):
//
//   - off: no TLS; the HTTP listener serves previews itself.
//   - acme: certmagic obtains and renews certificates, either on demand at the
//     first handshake for hosts the decision function approves (rate-limited),
//     or as one *.<domain> wildcard per domain through DNS-01 over RFC 2136.
//   - files: a certificate and key read from files, reloaded when they change.
//   - self-signed: a local CA kept in the data directory signs wildcard leaves.
//
// Certificates are switched under live traffic without dropping connections:
// GetCertificate always returns the current certificate, and existing
// connections keep the one they negotiated.
//
// It never asks a CA for a name the decision function did not approve, never
// redirects a host it does not serve, and knows nothing of sandboxes beyond
// that decision.
package certs

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/previewgate/previewgate/config"
)

// Config configures a Manager. TLS, DataDir and the addresses are set by
// config (defaults applied); the other fields' zero values work.
type Config struct {
	TLS     config.TLS
	Domains []string // sandbox-<id>.<domain> hosts are served for each

	// DataDir holds certmagic's storage and the local CA.
	DataDir string

	// HTTPAddr and HTTPSAddr are the listener addresses. The ACME solvers
	// need their ports (HTTP-01 is answered by HTTPHandler, TLS-ALPN-01 by
	// TLSConfig), and the redirect to HTTPS names the HTTPS port when it is
	// not 443.
	HTTPAddr  string
	HTTPSAddr string

	// Decide approves a host for an on-demand certificate (acme on-demand)
	// or a per-host leaf (self-signed on a single-label domain such as
	// localhost). The gateway passes SandboxHostDecider over its live route
	// table. Nil means SandboxHostDecider(Domains, nil).
	Decide func(host string) bool

	// Worth, in on-demand mode, says whether a host Decide approves is
	// worth a certificate: a route's host, a sandbox that exists or was
	// announced (#24, 7). A host it refuses gets one only if TLS.ACME.Ask
	// approves. Nil means every host Decide approves. Orders sent to the
	// CA in any hour, renewals included, are bounded by
	// TLS.ACME.IssuePerHour (zero means 20); a handshake over it fails
	// without contacting the CA.
	Worth func(host string) bool

	// ReloadInterval is how often files mode checks the certificate files.
	// Zero means 1s.
	ReloadInterval time.Duration

	// OnEvent, if set, is told about certificate events in acme mode
	// (certmagic's names: cert_obtaining, cert_obtained, cert_failed,
	// cached_managed_cert, ...). It must return quickly. For metrics.
	OnEvent func(event string)
}

// Manager serves certificates for one Config. Close releases it.
type Manager struct {
	cfg       Config
	mode      source // nil when TLS is off
	closeOnce sync.Once
}

type source interface {
	getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// handleHTTP answers an ACME HTTP-01 challenge; false if r is not one.
	handleHTTP(w http.ResponseWriter, r *http.Request) bool
	ready() error
	close()
}

// ErrNotReady is returned by Ready while certificates are still being
// obtained or loaded.
var ErrNotReady = errors.New("certificates not ready")

// New starts the manager for cfg.TLS.Mode. For mode off it returns a Manager
// whose TLSConfig is nil.
func New(cfg Config, log *slog.Logger) (*Manager, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "certs", "tls_mode", cfg.TLS.Mode)
	if cfg.Decide == nil {
		cfg.Decide = SandboxHostDecider(cfg.Domains, nil)
	}
	cfg.TLS.ACME.IssuePerHour = cmp.Or(cfg.TLS.ACME.IssuePerHour, 20)
	cfg.ReloadInterval = cmp.Or(cfg.ReloadInterval, time.Second)

	m := &Manager{cfg: cfg}
	var err error
	switch cfg.TLS.Mode {
	case config.TLSOff, "":
		return m, nil
	case config.TLSACME:
		m.mode, err = newACME(cfg, log)
	case config.TLSFiles:
		m.mode, err = newFiles(cfg, log)
	case config.TLSSelfSigned:
		m.mode, err = newSelfSigned(cfg, log)
	default:
		return nil, fmt.Errorf("certs: unknown tls mode %q", cfg.TLS.Mode)
	}
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", cfg.TLS.Mode, err)
	}
	return m, nil
}

// TLSConfig returns the configuration of the HTTPS listener: TLS 1.2 and up,
// AEAD suites with forward secrecy only, ALPN h2 and http/1.1 (plus
// acme-tls/1 in acme mode, for the TLS-ALPN-01 challenge). Session tickets
// stay on (Go rotates their keys). Nil when the mode is off. Each call
// returns a new *tls.Config.
func (m *Manager) TLSConfig() *tls.Config {
	if m.mode == nil {
		return nil
	}
	protos := []string{"h2", "http/1.1"}
	if _, ok := m.mode.(*acmeSource); ok {
		protos = append(protos, acmeTLS1Protocol)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// TLS 1.3 suites are not configurable and all good; for 1.2 only
		// ECDHE with AEAD ciphers.
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		NextProtos:     protos,
		GetCertificate: m.mode.getCertificate,
	}
}

// HTTPHandler returns the handler of the plain HTTP listener. With TLS off
// it is fallback itself (previews are served over HTTP). Otherwise it
// answers ACME HTTP-01 challenges and redirects requests for hosts
// Config.Decide approves with 308 to https on the same host, path and query
// (with the HTTPS port when it is not 443), less any access_token: a token
// sent in clear is not carried on. Other hosts get 404, so the listener is
// no open redirector for names it does not serve. fallback is unused then.
func (m *Manager) HTTPHandler(fallback http.Handler) http.Handler {
	if m.mode == nil {
		return fallback
	}
	_, port, err := net.SplitHostPort(m.cfg.HTTPSAddr)
	if err != nil || port == "443" {
		port = ""
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.mode.handleHTTP(w, r) {
			return
		}
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !validHostname(host) {
			http.Error(w, "bad host", http.StatusBadRequest)
			return
		}
		if !m.cfg.Decide(host) {
			http.Error(w, "unknown host", http.StatusNotFound)
			return
		}
		if port != "" {
			host = net.JoinHostPort(host, port)
		}
		u := *r.URL
		if q := u.Query(); q.Has("access_token") {
			q.Del("access_token")
			u.RawQuery = q.Encode()
		}
		http.Redirect(w, r, "https://"+host+u.RequestURI(), http.StatusPermanentRedirect)
	})
}

// Ready returns nil once the HTTPS listener can serve every configured
// domain: always in on-demand mode (certificates come at the first
// handshake), after the wildcard certificates are obtained in wildcard mode,
// after loading in files and self-signed modes. Else an error wrapping
// ErrNotReady.
func (m *Manager) Ready() error {
	if m.mode == nil {
		return nil
	}
	return m.mode.ready()
}

// Close stops background work (renewals, reloads, issuance in flight) and
// waits for it. It is safe to call more than once.
func (m *Manager) Close() {
	if m.mode != nil {
		m.closeOnce.Do(m.mode.close)
	}
}

// validHostname reports whether h is a plausible DNS name (letters, digits,
// hyphen, underscore, dots; at most 253 bytes). It keeps the redirect from
// echoing arbitrary bytes into a Location header.
func validHostname(h string) bool {
	if h == "" || len(h) > 253 || strings.HasPrefix(h, ".") || strings.Contains(h, "..") {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}
