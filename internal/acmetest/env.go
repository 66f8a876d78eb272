package acmetest

import (
	"encoding/base64"
	"net"
	"testing"

	"github.com/previewgate/previewgate/config"
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
	e := &Env{Zone: zone, HTTP: Listen(t), HTTPS: Listen(t)}
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
