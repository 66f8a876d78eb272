package acmetest

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
)

// Pebble is Pebble run in-process the way cmd/pebble wires it, behind an
// httptest TLS server, with a record of every order's identifiers.
type Pebble struct {
	DirURL     string         // ACME directory (config acme.ca)
	ServerRoot string         // PEM file of the ACME server's TLS certificate (config acme.ca_root)
	IssuerPool *x509.CertPool // Pebble's roots: verify the certificates it issues

	mu     sync.Mutex // guards orders
	orders [][]string
}

// StartPebble runs Pebble until cleanup. Its VA connects to 127.0.0.1 (as
// resolved by dnsAddr) on httpPort for HTTP-01 and tlsPort for TLS-ALPN-01,
// and looks TXT records up at dnsAddr for DNS-01.
//
// It sets PEBBLE_VA_NOSLEEP=1 and PEBBLE_WFE_NONCEREJECT=0 in the process
// environment (Pebble reads them when constructed): validate at once instead
// of after a random sleep, and never reject a good nonce.
func StartPebble(t testing.TB, httpPort, tlsPort int, dnsAddr string) *Pebble {
	t.Helper()
	os.Setenv("PEBBLE_VA_NOSLEEP", "1")
	os.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	logger := log.New(LogWriter(t), "pebble ", 0)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{
		"default": {Description: "The default profile"},
	})
	verifier := va.New(logger, httpPort, tlsPort, false, dnsAddr, store)
	front := wfe.New(logger, store, verifier, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)

	p := &Pebble{IssuerPool: x509.NewCertPool()}
	for i := range authority.GetNumberOfRootCerts() {
		p.IssuerPool.AddCert(authority.GetRootCert(i).Cert)
	}
	srv := httptest.NewTLSServer(p.recordOrders(front.Handler()))
	t.Cleanup(srv.Close)
	p.DirURL = srv.URL + wfe.DirectoryPath
	p.ServerRoot = filepath.Join(t.TempDir(), "acme-server.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p.ServerRoot, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// recordOrders notes the identifiers of each new-order request (a JWS whose
// payload lists them) before Pebble handles it.
func (p *Pebble) recordOrders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/order-plz" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var jws struct{ Payload string }
			var order struct {
				Identifiers []struct{ Value string }
			}
			if json.Unmarshal(body, &jws) == nil {
				if raw, err := base64.RawURLEncoding.DecodeString(jws.Payload); err == nil && json.Unmarshal(raw, &order) == nil {
					var names []string
					for _, id := range order.Identifiers {
						names = append(names, id.Value)
					}
					p.mu.Lock()
					p.orders = append(p.orders, names)
					p.mu.Unlock()
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// OrdersFor counts the orders that named host.
func (p *Pebble) OrdersFor(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, names := range p.orders {
		for _, v := range names {
			if strings.EqualFold(v, host) {
				n++
			}
		}
	}
	return n
}

// Orders returns the identifiers of every order so far.
func (p *Pebble) Orders() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]string(nil), p.orders...)
}
