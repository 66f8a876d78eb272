package certs

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/previewgate/previewgate/config"
)

const testDomain = "preview.test"

// acmeSetup is a gateway stand-in in front of in-process pebble: the HTTPS
// listener with Manager.TLSConfig, the HTTP listener with HTTPHandler, and
// the DNS server both pebble and the RFC 2136 provider talk to.
type acmeSetup struct {
	m         *Manager
	dns       *testDNS
	pebble    *testPebble
	httpAddr  string
	httpsAddr string
}

func startACME(t *testing.T, strategy string) *acmeSetup {
	t.Helper()
	httpLn, httpsLn := listen(t), listen(t)
	secret := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	d := startDNS(t, testDomain, "previewgate-key", secret)
	p := startPebble(t, portOf(t, httpLn.Addr().String()), portOf(t, httpsLn.Addr().String()), d.Addr)

	m, err := New(Config{
		TLS: config.TLS{Mode: config.TLSACME, ACME: config.ACME{
			Email:    "ops@" + testDomain,
			CA:       p.DirURL,
			CARoot:   p.ServerRoot,
			Strategy: strategy,
			RFC2136: config.RFC2136{
				Server:     d.Addr,
				TSIGKey:    "previewgate-key",
				TSIGSecret: config.Secret(secret),
				TSIGAlg:    "hmac-sha256",
			},
		}},
		Domains:   []string{testDomain},
		DataDir:   t.TempDir(),
		HTTPAddr:  httpLn.Addr().String(),
		HTTPSAddr: httpsLn.Addr().String(),
	}, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(m.Close)
	serve(t, httpLn, m.HTTPHandler(nil), nil)
	serve(t, httpsLn, appHandler, m.TLSConfig())
	return &acmeSetup{m: m, dns: d, pebble: p, httpAddr: httpLn.Addr().String(), httpsAddr: httpsLn.Addr().String()}
}

// get fetches https://host/ through the HTTPS listener, verifying against
// pebble's root, and returns the body and the served leaf.
func (s *acmeSetup) get(t *testing.T, host string) (string, *tls.ConnectionState) {
	t.Helper()
	resp, err := clientFor(s.httpsAddr, s.pebble.IssuerPool).Get("https://" + host + "/")
	if err != nil {
		t.Fatalf("GET https://%s/: %v", host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET https://%s/: got status %d, want 200", host, resp.StatusCode)
	}
	return string(body), resp.TLS
}

// TestOnDemandPebble is done-means 1: the first handshake for a sandbox host
// obtains a certificate from pebble (HTTP-01 or TLS-ALPN-01 against our
// listeners), the chain verifies against pebble's root, and names the
// decision rejects get no certificate and no order.
func TestOnDemandPebble(t *testing.T) {
	t.Parallel()
	s := startACME(t, config.StrategyOnDemand)
	if err := s.m.Ready(); err != nil {
		t.Fatalf("Ready: got %v, want nil for on-demand", err)
	}

	host := "sandbox-abc." + testDomain
	body, cs := s.get(t, host)
	if want := "hello from " + host; body != want {
		t.Errorf("body: got %q, want %q", body, want)
	}
	if cs.NegotiatedProtocol != "h2" {
		t.Errorf("ALPN: got %q, want h2", cs.NegotiatedProtocol)
	}
	if got := cs.PeerCertificates[0].DNSNames; !slices.Equal(got, []string{host}) {
		t.Errorf("leaf names: got %v, want [%s]", got, host)
	}
	// A second connection reuses the certificate: still one order.
	s.get(t, host)
	if n := s.pebble.ordersFor(host); n != 1 {
		t.Errorf("orders for %s: got %d, want 1", host, n)
	}

	for _, bad := range []string{
		"evil.example",
		"sandbox-Bad_." + testDomain,
		"sandbox-." + testDomain,
		"sandbox-abc-." + testDomain,
		"other." + testDomain,
		"sandbox-abc.evil.example",
	} {
		t.Run(bad, func(t *testing.T) {
			conn, err := net.Dial("tcp", s.httpsAddr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			tc := tls.Client(conn, &tls.Config{ServerName: bad, InsecureSkipVerify: true})
			if err := tc.Handshake(); err == nil {
				t.Errorf("handshake for %q: got a certificate %v, want none", bad, tc.ConnectionState().PeerCertificates[0].DNSNames)
			}
			if n := s.pebble.ordersFor(bad); n != 0 {
				t.Errorf("orders for %q: got %d, want 0", bad, n)
			}
		})
	}
	if got := s.pebble.allOrders(); len(got) != 1 {
		t.Errorf("all orders: got %v, want only [[%s]]", got, host)
	}

	t.Run("http redirect", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.httpAddr+"/a/b?c=d", nil)
		req.Host = host
		resp, err := clientFor(s.httpAddr, nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := "https://" + net.JoinHostPort(host, strconv.Itoa(portOf(t, s.httpsAddr))) + "/a/b?c=d"
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
			t.Errorf("got %d %q, want 308 %q", resp.StatusCode, resp.Header.Get("Location"), want)
		}
	})
}

// TestOnDemandRateLimit: issuance beyond the burst fails the handshake
// without an order, while certificates already obtained keep serving.
func TestOnDemandRateLimit(t *testing.T) {
	t.Parallel()
	s := startACME(t, config.StrategyOnDemand)
	src := s.m.mode.(*acmeSource)
	li := src.magic.Issuers[0].(*limitedIssuer)
	li.lim.SetBurst(1)
	li.lim.SetLimit(0)

	first := "sandbox-first." + testDomain
	s.get(t, first)

	second := "sandbox-second." + testDomain
	_, err := clientFor(s.httpsAddr, s.pebble.IssuerPool).Get("https://" + second + "/")
	if err == nil {
		t.Fatalf("GET %s: got success, want a failed handshake (rate limited)", second)
	}
	if n := s.pebble.ordersFor(second); n != 0 {
		t.Errorf("orders for %s: got %d, want 0", second, n)
	}
	s.get(t, first) // cached certificate still served
}

// TestWildcardPebble is done-means 2: *.<domain> via DNS-01, the TXT record
// placed by TSIG-signed RFC 2136 updates, one certificate serving two
// sandbox hosts.
func TestWildcardPebble(t *testing.T) {
	t.Parallel()
	s := startACME(t, config.StrategyWildcard)
	waitFor(t, "the wildcard certificate", func() bool { return s.m.Ready() == nil })

	_, a := s.get(t, "sandbox-one."+testDomain)
	_, b := s.get(t, "sandbox-two."+testDomain)
	if !bytes.Equal(a.PeerCertificates[0].Raw, b.PeerCertificates[0].Raw) {
		t.Errorf("two hosts got different certificates, want the one wildcard")
	}
	if got := a.PeerCertificates[0].DNSNames; !slices.Equal(got, []string{"*." + testDomain}) {
		t.Errorf("leaf names: got %v, want [*.%s]", got, testDomain)
	}
	if n := s.pebble.ordersFor("*." + testDomain); n != 1 {
		t.Errorf("wildcard orders: got %d, want 1", n)
	}
	accepted, refused := s.dns.counts()
	if accepted < 2 || refused != 0 {
		t.Errorf("dns updates: got %d accepted %d refused, want ≥2 (add, delete) and 0", accepted, refused)
	}
	waitFor(t, "challenge record cleanup", func() bool {
		return len(s.dns.txtValues("_acme-challenge."+testDomain)) == 0
	})

	// A host outside the wildcard gets nothing: wildcard mode never
	// issues on demand.
	conn, err := net.Dial("tcp", s.httpsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := tls.Client(conn, &tls.Config{ServerName: "evil.example", InsecureSkipVerify: true}).Handshake(); err == nil {
		t.Errorf("handshake for evil.example: got a certificate, want none")
	}
	if errors.Is(s.m.Ready(), ErrNotReady) {
		t.Errorf("Ready: got %v after issuance", s.m.Ready())
	}
}
