package acmetest

import (
	"encoding/base64"
	"net"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TSIG key of the Env's DNS server.
const (
	TSIGKey = "previewgate-key"
	TSIGAlg = "hmac-sha256"
)

// TSIGSecret is the base64 secret of TSIGKey.
var TSIGSecret = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// Env is an ACME world for one test: the HTTP and HTTPS listeners the
// gateway under test serves on (Pebble's VA validates against their ports),
// a DNS server authoritative for Zone that resolves every name to 127.0.0.1
// and accepts updates signed with TSIGKey, and Pebble.
type Env struct {
	Zone   string
	HTTP   net.Listener // serve the certs HTTP handler here (HTTP-01)
	HTTPS  net.Listener // serve with the certs TLS config here (TLS-ALPN-01)
	DNS    *DNS
	Pebble *Pebble
}

// NewEnv starts the listeners, the DNS server for zone and Pebble; all stop
// at cleanup. The listeners are not served: that is the test's part.
func NewEnv(t testing.TB, zone string) *Env {
	t.Helper()
	e := &Env{Zone: zone, HTTP: testkit.Listen(t), HTTPS: testkit.Listen(t)}
	e.DNS = StartDNS(t, zone, TSIGKey, TSIGSecret)
	e.Pebble = StartPebble(t, Port(t, e.HTTP.Addr().String()), Port(t, e.HTTPS.Addr().String()), e.DNS.Addr)
	return e
}

// TLS returns the tls section for mode acme with strategy (on-demand or
// wildcard) against this Env's Pebble, with DNS-01 through its DNS server.
func (e *Env) TLS(strategy string) config.TLS {
	return config.TLS{Mode: config.TLSACME, ACME: config.ACME{
		Email:    "ops@" + e.Zone,
		CA:       e.Pebble.DirURL,
		CARoot:   e.Pebble.ServerRoot,
		Strategy: strategy,
		RFC2136: config.RFC2136{
			Server:     e.DNS.Addr,
			TSIGKey:    TSIGKey,
			TSIGSecret: config.Secret(TSIGSecret),
			TSIGAlg:    TSIGAlg,
		},
	}}
}

// RefusedHosts are names an on-demand host decision for e.Zone must refuse:
// a foreign name, malformed sandbox ids, a host that is no sandbox, a nested
// label, and a sandbox label under a foreign domain.
func (e *Env) RefusedHosts() []string {
	return []string{
		"evil.example",
		"sandbox-Bad_." + e.Zone,
		"sandbox-." + e.Zone,
		"sandbox-abc-." + e.Zone,
		"sandbox-" + strings.Repeat("a", 56) + "." + e.Zone,
		"other." + e.Zone,
		"x.sandbox-abc." + e.Zone,
		"sandbox-abc.evil.example",
	}
}

// WantNoCertificates checks, host by host, that a handshake with the HTTPS
// listener fails and that Pebble saw no order naming the host.
func (e *Env) WantNoCertificates(t *testing.T, hosts []string) {
	t.Helper()
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			if leaf, err := Handshake(e.HTTPS.Addr().String(), host); err == nil {
				t.Errorf("handshake for %q: got a certificate for %v, want none", host, leaf.DNSNames)
			}
			if n := e.Pebble.OrdersFor(host); n != 0 {
				t.Errorf("orders for %q: got %d, want 0", host, n)
			}
		})
	}
}
