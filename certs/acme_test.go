package certs

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/acmetest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

const testDomain = "preview.test"

// acmeSetup is a gateway stand-in in front of in-process pebble: the HTTPS
// listener with Manager.TLSConfig, the HTTP listener with HTTPHandler, and
// the DNS server both pebble and the RFC 2136 provider talk to.
type acmeSetup struct {
	*acmetest.Env
	m         *Manager
	httpAddr  string
	httpsAddr string

	mu     sync.Mutex // guards events
	events []string   // reported through Config.OnEvent
}

func (s *acmeSetup) sawEvent(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.events, name)
}

func startACME(t *testing.T, strategy string) *acmeSetup {
	t.Helper()
	return startACMEWith(t, strategy, nil)
}

// startACMEWith is startACME with edit applied to the certs config.
func startACMEWith(t *testing.T, strategy string, edit func(*Config)) *acmeSetup {
	t.Helper()
	env := acmetest.NewEnv(t, testDomain)
	s := &acmeSetup{Env: env, httpAddr: env.HTTP.Addr().String(), httpsAddr: env.HTTPS.Addr().String()}
	cfg := Config{
		TLS:       env.TLS(strategy),
		Domains:   []string{testDomain},
		DataDir:   t.TempDir(),
		HTTPAddr:  s.httpAddr,
		HTTPSAddr: s.httpsAddr,
		OnEvent: func(event string) {
			s.mu.Lock()
			s.events = append(s.events, event)
			s.mu.Unlock()
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	m, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(m.Close)
	s.m = m
	acmetest.Serve(t, env.HTTP, m.HTTPHandler(nil), nil)
	acmetest.Serve(t, env.HTTPS, appHandler, m.TLSConfig())
	return s
}

// get fetches https://host/ through the HTTPS listener, verifying against
// pebble's root, and returns the body and the served leaf.
func (s *acmeSetup) get(t *testing.T, host string) (string, *tls.ConnectionState) {
	t.Helper()
	resp, err := acmetest.Client(s.httpsAddr, s.Pebble.IssuerPool).Get("https://" + host + "/")
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
	if !s.sawEvent("cert_obtained") {
		t.Errorf("OnEvent: no cert_obtained among %v", s.events)
	}
	// A second connection reuses the certificate: still one order.
	s.get(t, host)
	if n := s.Pebble.OrdersFor(host); n != 1 {
		t.Errorf("orders for %s: got %d, want 1", host, n)
	}

	s.WantNoCertificates(t, s.RefusedHosts())
	if got := s.Pebble.Orders(); len(got) != 1 {
		t.Errorf("all orders: got %v, want only [[%s]]", got, host)
	}

	t.Run("http redirect", func(t *testing.T) {
		acmetest.WantRedirect(t, s.httpAddr, s.httpsAddr, http.MethodPost, "http://"+host+"/a/b?c=d")
		// Not an open redirector for names it does not serve (#13).
		for _, foreign := range []string{"evil.example", "sandbox-x.evil.example"} {
			if status, loc := acmetest.Redirect(t, s.httpAddr, http.MethodGet, "http://"+foreign+"/"); status != http.StatusNotFound {
				t.Errorf("%s: got %d Location %q, want 404", foreign, status, loc)
			}
		}
		// A token sent in clear is not carried on to https.
		status, loc := acmetest.Redirect(t, s.httpAddr, http.MethodGet, "http://"+host+"/p?access_token=secret&c=d")
		if status != http.StatusPermanentRedirect || strings.Contains(loc, "secret") || !strings.HasSuffix(loc, "/p?c=d") {
			t.Errorf("got %d Location %q, want 308 to /p?c=d without the token", status, loc)
		}
	})
}

// TestOnDemandRateLimit: issuance beyond the hour's budget fails the
// handshake without an order, while certificates already obtained keep
// serving (#24, 7: tls.acme.issue_per_hour).
func TestOnDemandRateLimit(t *testing.T) {
	t.Parallel()
	s := startACMEWith(t, config.StrategyOnDemand, func(c *Config) { c.TLS.ACME.IssuePerHour = 1 })

	first := "sandbox-first." + testDomain
	s.get(t, first)

	second := "sandbox-second." + testDomain
	_, err := acmetest.Client(s.httpsAddr, s.Pebble.IssuerPool).Get("https://" + second + "/")
	if err == nil {
		t.Fatalf("GET %s: got success, want a failed handshake (rate limited)", second)
	}
	if n := s.Pebble.OrdersFor(second); n != 0 {
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
	testkit.WaitFor(t, "the wildcard certificate", func() bool { return s.m.Ready() == nil })

	_, a := s.get(t, "sandbox-one."+testDomain)
	_, b := s.get(t, "sandbox-two."+testDomain)
	if !bytes.Equal(a.PeerCertificates[0].Raw, b.PeerCertificates[0].Raw) {
		t.Errorf("two hosts got different certificates, want the one wildcard")
	}
	if got := a.PeerCertificates[0].DNSNames; !slices.Equal(got, []string{"*." + testDomain}) {
		t.Errorf("leaf names: got %v, want [*.%s]", got, testDomain)
	}
	if n := s.Pebble.OrdersFor("*." + testDomain); n != 1 {
		t.Errorf("wildcard orders: got %d, want 1", n)
	}
	accepted, refused := s.DNS.Counts()
	if accepted < 2 || refused != 0 {
		t.Errorf("dns updates: got %d accepted %d refused, want ≥2 (add, delete) and 0", accepted, refused)
	}
	testkit.WaitFor(t, "challenge record cleanup", func() bool {
		return len(s.DNS.TXT("_acme-challenge."+testDomain)) == 0
	})

	// A host outside the wildcard gets nothing: wildcard mode never
	// issues on demand.
	if _, err := acmetest.Handshake(s.httpsAddr, "evil.example"); err == nil {
		t.Errorf("handshake for evil.example: got a certificate, want none")
	}
	if errors.Is(s.m.Ready(), ErrNotReady) {
		t.Errorf("Ready: got %v after issuance", s.m.Ready())
	}
}

// TestOnDemandOnlyWorthyNames: a well-formed sandbox name gets a
// certificate only if the gateway knows it (Worth: it exists or was
// announced) or the ask hook approves it; any other name fails the
// handshake with no order at the CA, so nobody can spend the domain's
// budget on made-up ids (#24, 7).
func TestOnDemandOnlyWorthyNames(t *testing.T) {
	t.Parallel()
	var asked []string
	var mu sync.Mutex
	ask := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := r.URL.Query().Get("domain")
		mu.Lock()
		asked = append(asked, d)
		mu.Unlock()
		if !strings.HasPrefix(d, "sandbox-asked.") {
			http.Error(w, "no", http.StatusForbidden)
		}
	}))
	defer ask.Close()
	known := "sandbox-known." + testDomain
	s := startACMEWith(t, config.StrategyOnDemand, func(c *Config) {
		c.Worth = func(host string) bool { return host == known }
		c.TLS.ACME.Ask = ask.URL + "/check"
	})
	s.get(t, known)
	s.get(t, "sandbox-asked."+testDomain)
	s.WantNoCertificates(t, []string{"sandbox-madeup." + testDomain, "sandbox-other." + testDomain})
	if got := s.Pebble.Orders(); len(got) != 2 {
		t.Errorf("orders: got %v, want the known and the asked name only", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(asked, known) || !slices.Contains(asked, "sandbox-madeup."+testDomain) {
		t.Errorf("asked %v: want the unknown names asked, the known one not", asked)
	}
}

// TestHourlyBudget: at most max orders in any hour, a sliding window.
func TestHourlyBudget(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &hourly{max: 2, now: func() time.Time { return now }}
	for i, tc := range []struct {
		after time.Duration
		want  bool
	}{{0, true}, {10 * time.Minute, true}, {40 * time.Minute, false}, {10 * time.Minute, true}, {time.Minute, false}, {10 * time.Minute, true}} {
		now = now.Add(tc.after)
		if got := h.take(); got != tc.want {
			t.Errorf("take %d at %s: got %v, want %v", i, now.Format("15:04"), got, tc.want)
		}
	}
}
