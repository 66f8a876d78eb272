package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

func TestMain(m *testing.M) {
	// Read by pebble's va.New and wfe.New: validate at once instead of
	// after a random sleep, and never reject a good nonce.
	os.Setenv("PEBBLE_VA_NOSLEEP", "1")
	os.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	os.Exit(m.Run())
}

// testLogger returns a slog.Logger writing to t.Log until the test ends
// (certmagic and pebble goroutines may still log after that).
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func newTestWriter(t testing.TB) *testWriter {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// listen returns a loopback TCP listener on a random port, closed at cleanup.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func portOf(t testing.TB, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// serve runs an http.Server on ln (TLS if tc is set) until cleanup.
func serve(t testing.TB, ln net.Listener, h http.Handler, tc *tls.Config) {
	t.Helper()
	srv := &http.Server{Handler: h, TLSConfig: tc, ErrorLog: log.New(newTestWriter(t), "http: ", 0)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if tc != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve %s: %v", ln.Addr(), err)
		}
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
}

// appHandler stands in for the gateway: 200 with the host it saw.
var appHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "hello from "+r.Host)
})

// testDNS is an authoritative server for one zone on loopback UDP. It
// answers A 127.0.0.1 for every name (so pebble's VA reaches our listeners),
// serves the zone's SOA and the TXT records it holds, and applies RFC 2136
// updates only when they carry a valid TSIG of its key.
type testDNS struct {
	Addr    string
	zone    string // fqdn
	keyName string // fqdn
	secret  string // base64

	mu       sync.Mutex          // guards the fields below
	txt      map[string][]string // fqdn → values
	accepted int                 // signed updates applied
	refused  int                 // updates refused for a missing or bad TSIG
}

func startDNS(t testing.TB, zone, keyName, secret string) *testDNS {
	t.Helper()
	// Pebble's VA asks over TCP, certmagic over UDP: serve both on one port.
	var pc net.PacketConn
	var ln net.Listener
	for range 20 {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no free port for both UDP and TCP")
	}
	d := &testDNS{
		Addr:    pc.LocalAddr().String(),
		zone:    dns.CanonicalName(zone),
		keyName: dns.CanonicalName(keyName),
		secret:  secret,
		txt:     make(map[string][]string),
	}
	for _, srv := range []*dns.Server{{PacketConn: pc}, {Listener: ln}} {
		srv.Handler = d
		// The default accept func answers NOTIMP to UPDATE.
		srv.MsgAcceptFunc = func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }
		srv.TsigSecret = map[string]string{d.keyName: secret}
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.ActivateAndServe()
		}()
		<-started
		t.Cleanup(func() {
			srv.Shutdown()
			<-done
		})
	}
	return d
}

func (d *testDNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if r.Opcode == dns.OpcodeUpdate {
		d.update(w, r, m)
		return
	}
	for _, q := range r.Question {
		name := strings.ToLower(q.Name)
		switch q.Qtype {
		case dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
				A:   net.IPv4(127, 0, 0, 1),
			})
		case dns.TypeTXT:
			d.mu.Lock()
			for _, v := range d.txt[name] {
				m.Answer = append(m.Answer, &dns.TXT{
					Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 1},
					Txt: []string{v},
				})
			}
			d.mu.Unlock()
		case dns.TypeSOA:
			if name == d.zone {
				m.Answer = append(m.Answer, &dns.SOA{
					Hdr: dns.RR_Header{Name: d.zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 1},
					Ns:  "ns." + d.zone, Mbox: "hostmaster." + d.zone,
					Serial: 1, Refresh: 60, Retry: 60, Expire: 600, Minttl: 1,
				})
			}
		}
	}
	w.WriteMsg(m)
}

// update applies an RFC 2136 update if its TSIG verified (the server checks
// the MAC with TsigSecret and reports the result in TsigStatus).
func (d *testDNS) update(w dns.ResponseWriter, r *dns.Msg, m *dns.Msg) {
	tsig := r.IsTsig()
	if tsig == nil || w.TsigStatus() != nil || dns.CanonicalName(tsig.Hdr.Name) != d.keyName {
		d.mu.Lock()
		d.refused++
		d.mu.Unlock()
		m.Rcode = dns.RcodeNotAuth
		w.WriteMsg(m)
		return
	}
	if len(r.Question) != 1 || dns.CanonicalName(r.Question[0].Name) != d.zone {
		m.Rcode = dns.RcodeNotZone
		m.SetTsig(d.keyName, tsig.Algorithm, 300, time.Now().Unix())
		w.WriteMsg(m)
		return
	}
	d.mu.Lock()
	for _, rr := range r.Ns {
		h := rr.Header()
		name := strings.ToLower(h.Name)
		switch h.Class {
		case dns.ClassINET: // add
			if txt, ok := rr.(*dns.TXT); ok {
				d.txt[name] = append(d.txt[name], strings.Join(txt.Txt, ""))
			}
		case dns.ClassNONE: // delete one RR
			if txt, ok := rr.(*dns.TXT); ok {
				v := strings.Join(txt.Txt, "")
				kept := d.txt[name][:0]
				for _, old := range d.txt[name] {
					if old != v {
						kept = append(kept, old)
					}
				}
				d.txt[name] = kept
			}
		case dns.ClassANY: // delete an RRset or a name
			delete(d.txt, name)
		}
	}
	d.accepted++
	d.mu.Unlock()
	m.SetTsig(d.keyName, tsig.Algorithm, 300, time.Now().Unix())
	w.WriteMsg(m)
}

func (d *testDNS) counts() (accepted, refused int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.accepted, d.refused
}

func (d *testDNS) txtValues(name string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.txt[dns.CanonicalName(name)]...)
}

// testPebble is pebble run in-process the way cmd/pebble wires it, behind
// an httptest TLS server, with a record of every order's identifiers.
type testPebble struct {
	DirURL     string
	ServerRoot string         // PEM file of the ACME server's TLS certificate (config acme.ca_root)
	IssuerPool *x509.CertPool // pebble's root: verifies the certificates it issues

	mu     sync.Mutex
	orders [][]string
}

// startPebble runs pebble whose VA connects to httpPort for HTTP-01, to
// tlsPort for TLS-ALPN-01, and resolves names and TXT records at dnsAddr.
func startPebble(t testing.TB, httpPort, tlsPort int, dnsAddr string) *testPebble {
	t.Helper()
	logger := log.New(newTestWriter(t), "pebble ", 0)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{
		"default": {Description: "The default profile"},
	})
	verifier := va.New(logger, httpPort, tlsPort, false, dnsAddr, store)
	front := wfe.New(logger, store, verifier, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)

	p := &testPebble{IssuerPool: x509.NewCertPool()}
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
// payload lists them) before pebble handles it.
func (p *testPebble) recordOrders(next http.Handler) http.Handler {
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

// ordersFor counts the orders that named host.
func (p *testPebble) ordersFor(host string) int {
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

func (p *testPebble) allOrders() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]string(nil), p.orders...)
}

// clientFor returns an HTTP client that sends every request to addr,
// whatever the URL's host, verifying the server against roots.
func clientFor(addr string, roots *x509.CertPool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// waitFor polls cond until it holds or the test's generous deadline passes.
// It bounds a hang, it does not measure speed.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
