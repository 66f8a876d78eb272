package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/previewgate/previewgate/certs"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/acmetest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// tlsGateway is the real gateway (Options{TLS: true}) with a real sandbox
// manager, served the way main serves it: on an HTTPS listener with the certs
// manager's TLS config and on an HTTP listener with its HTTP handler (ACME
// HTTP-01, else a redirect), in front of in-process Pebble and DNS (issue 4,
// done-means 1 and 2 through the gateway rather than a stub handler).
type tlsGateway struct {
	*acmetest.Env
	docker    *dockerEnv
	certs     *certs.Manager
	httpsAddr string
}

func startTLSGateway(t *testing.T, strategy string) *tlsGateway {
	t.Helper()
	e := newDockerEnv(t, nil)
	env := acmetest.NewEnv(t, testDomain)
	g := &tlsGateway{Env: env, docker: e, httpsAddr: env.HTTPS.Addr().String()}
	cm, err := certs.New(certs.Config{
		TLS:       env.TLS(strategy),
		Domains:   e.cfg.Domains,
		DataDir:   t.TempDir(),
		HTTPAddr:  env.HTTP.Addr().String(),
		HTTPSAddr: g.httpsAddr,
		Decide:    certs.SandboxHostDecider(e.cfg.Domains, nil),
	}, testkit.Logger(t))
	if err != nil {
		t.Fatalf("certs.New: %v", err)
	}
	t.Cleanup(cm.Close)
	g.certs = cm
	// A second gateway on the env's manager: the env's own one serves plain
	// HTTP with Options{}.
	gw, err := New(e.cfg, e.mgr, Options{TLS: true}, testkit.Logger(t))
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	t.Cleanup(gw.Close)
	acmetest.Serve(t, env.HTTP, cm.HTTPHandler(gw), nil)
	srv := NewServer(e.cfg, gw, testkit.Logger(t))
	srv.TLSConfig = cm.TLSConfig()
	serveOn(t, srv, env.HTTPS)
	return g
}

// get fetches https://host/path through the gateway with a token for id,
// verifying the chain against Pebble's root, and wants the test app's 200
// echo of that path and host.
func (g *tlsGateway) get(t *testing.T, id, path string) *http.Response {
	t.Helper()
	return g.getHost(t, "sandbox-"+id+"."+testDomain, id, path)
}

// getHost is get on another host of sandbox id (a port host).
func (g *tlsGateway) getHost(t *testing.T, host, id, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testkit.Mint(t, g.docker.cfg, id, time.Minute))
	resp, err := acmetest.Client(g.httpsAddr, g.Pebble.IssuerPool).Do(req)
	if err != nil {
		t.Fatalf("GET https://%s%s: %v", host, path, err)
	}
	defer resp.Body.Close()
	body := wantStatus(t, resp, http.StatusOK)
	var echo struct {
		Path, Host string
		Headers    http.Header
	}
	if err := json.Unmarshal(body, &echo); err != nil {
		t.Fatalf("got body %s (%v), want the test app's JSON echo", body, err)
	}
	// The default host mode (local): the app sees its local identity, the
	// real host in X-Forwarded-Host.
	if fwd := echo.Headers.Get("X-Forwarded-Host"); echo.Path != path || echo.Host != "localhost:3000" || fwd != host {
		t.Errorf("app saw path %q host %q X-Forwarded-Host %q, want %q localhost:3000 %q", echo.Path, echo.Host, fwd, path, host)
	}
	if got := echo.Headers.Get("X-Forwarded-Proto"); got != "https" {
		t.Errorf("app saw X-Forwarded-Proto %q, want https", got)
	}
	if got := echo.Headers.Get("Authorization"); got != "" {
		t.Errorf("token reached the sandbox: Authorization %q", got)
	}
	return resp
}

// TestTLSOnDemandThroughGateway: the first handshake for a sandbox host gets
// a certificate from Pebble, the chain verifies against Pebble's root and the
// app answers 200 through the gateway; hosts the decision rejects get no
// certificate, no order at Pebble, and never reach Docker.
func TestTLSOnDemandThroughGateway(t *testing.T) {
	g := startTLSGateway(t, config.StrategyOnDemand)
	id := dockertest.UniqueID("abc")
	host := "sandbox-" + id + "." + testDomain

	resp := g.get(t, id, "/hello")
	if got := resp.TLS.PeerCertificates[0].DNSNames; !slices.Equal(got, []string{host}) {
		t.Errorf("leaf names: got %v, want [%s]", got, host)
	}
	if resp.TLS.NegotiatedProtocol != "h2" {
		t.Errorf("ALPN: got %q, want h2", resp.TLS.NegotiatedProtocol)
	}
	g.get(t, id, "/again") // a new connection reuses the certificate
	if n := g.Pebble.OrdersFor(host); n != 1 {
		t.Errorf("orders for %s: got %d, want 1", host, n)
	}
	g.docker.onlyContainer(id)

	ensures := g.docker.mgr.ensures.Load()
	g.WantNoCertificates(t, g.RefusedHosts())
	if got := g.Pebble.Orders(); len(got) != 1 {
		t.Errorf("all orders: got %v, want only [[%s]]", got, host)
	}
	if n := g.docker.mgr.ensures.Load(); n != ensures {
		t.Errorf("Ensure calls after rejected handshakes: got %d, want %d", n, ensures)
	}

	t.Run("http redirects", func(t *testing.T) {
		acmetest.WantRedirect(t, g.HTTP.Addr().String(), g.httpsAddr, http.MethodGet, "http://"+host+"/a/b?c=d")
	})

	// A port host (#22) is approved too, and gets its own certificate.
	portHost := "3000-" + host
	if got := g.getHost(t, portHost, id, "/port").TLS.PeerCertificates[0].DNSNames; !slices.Equal(got, []string{portHost}) {
		t.Errorf("port host leaf names: got %v, want [%s]", got, portHost)
	}
}

// TestTLSWildcardThroughGateway: *.<domain> obtained via DNS-01 (TXT placed
// with TSIG-signed RFC 2136 updates) serves two sandboxes through the
// gateway with one and the same certificate.
func TestTLSWildcardThroughGateway(t *testing.T) {
	g := startTLSGateway(t, config.StrategyWildcard)
	testkit.WaitFor(t, "the wildcard certificate", func() bool { return g.certs.Ready() == nil })

	one, two := dockertest.UniqueID("one"), dockertest.UniqueID("two")
	a := g.get(t, one, "/").TLS.PeerCertificates[0]
	b := g.get(t, two, "/").TLS.PeerCertificates[0]
	if !bytes.Equal(a.Raw, b.Raw) {
		t.Errorf("the two sandboxes got different certificates (serials %v, %v), want the one wildcard", a.SerialNumber, b.SerialNumber)
	}
	if got := a.DNSNames; !slices.Equal(got, []string{"*." + testDomain}) {
		t.Errorf("leaf names: got %v, want [*.%s]", got, testDomain)
	}
	if got := g.Pebble.Orders(); len(got) != 1 || g.Pebble.OrdersFor("*."+testDomain) != 1 {
		t.Errorf("orders: got %v, want only [[*.%s]]", got, testDomain)
	}
	if accepted, refused := g.DNS.Counts(); accepted < 1 || refused != 0 {
		t.Errorf("dns updates: got %d accepted, %d refused; want ≥1 and 0", accepted, refused)
	}
	g.docker.onlyContainer(one)
	g.docker.onlyContainer(two)
}
