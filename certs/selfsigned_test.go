package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/acmetest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

func startSelfSigned(t testing.TB, dataDir string, domains ...string) (m *Manager, httpsAddr, httpAddr string) {
	t.Helper()
	httpsLn, httpLn := testkit.Listen(t), testkit.Listen(t)
	m, err := New(Config{
		TLS:       config.TLS{Mode: config.TLSSelfSigned},
		Domains:   domains,
		DataDir:   dataDir,
		HTTPAddr:  httpLn.Addr().String(),
		HTTPSAddr: httpsLn.Addr().String(),
	}, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(m.Close)
	acmetest.Serve(t, httpsLn, appHandler, m.TLSConfig())
	acmetest.Serve(t, httpLn, m.HTTPHandler(nil), nil)
	return m, httpsLn.Addr().String(), httpLn.Addr().String()
}

func exportPool(t *testing.T, dataDir string) (*x509.CertPool, []byte) {
	t.Helper()
	caPEM, err := ExportCA(dataDir)
	if err != nil {
		t.Fatalf("ExportCA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ExportCA returned no PEM certificate: %q", caPEM)
	}
	return pool, caPEM
}

// TestSelfSigned is done-means 4: the exported CA verifies what the HTTPS
// listener serves for sandbox hosts, and plain HTTP redirects to HTTPS.
func TestSelfSigned(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	m, httpsAddr, httpAddr := startSelfSigned(t, dataDir, "localhost", testDomain)
	if err := m.Ready(); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	pool, caPEM := exportPool(t, dataDir)
	client := acmetest.Client(httpsAddr, pool)

	tests := []struct {
		host      string
		wantNames []string
	}{
		// Single-label domain: a leaf per host, since clients refuse
		// *.localhost.
		{"sandbox-x.localhost", []string{"sandbox-x.localhost"}},
		{"localhost", []string{"*.localhost", "localhost"}},
		{"sandbox-x." + testDomain, []string{"*." + testDomain, testDomain}},
		{"sandbox-y." + testDomain, []string{"*." + testDomain, testDomain}},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			resp, err := client.Get("https://" + tt.host + "/")
			if err != nil {
				t.Fatalf("GET: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "hello from "+tt.host {
				t.Errorf("got %d %q, want 200 from the app", resp.StatusCode, body)
			}
			if got := resp.TLS.PeerCertificates[0].DNSNames; !slices.Equal(got, tt.wantNames) {
				t.Errorf("leaf names: got %v, want %v", got, tt.wantNames)
			}
		})
	}

	t.Run("malformed sandbox host gets no per-host leaf", func(t *testing.T) {
		// It gets the domain's wildcard leaf, which OpenSSL and browsers
		// refuse for a single-label domain; no leaf is minted for it.
		conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "sandbox-Bad_.localhost", InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		want := []string{"*.localhost", "localhost"}
		if got := conn.ConnectionState().PeerCertificates[0].DNSNames; !slices.Equal(got, want) {
			t.Errorf("leaf names: got %v, want %v", got, want)
		}
	})

	t.Run("redirect", func(t *testing.T) {
		tests := []struct {
			target, host, want string
		}{
			{"/", "sandbox-x.localhost", "https://sandbox-x.localhost:" + strconv.Itoa(acmetest.Port(t, httpsAddr)) + "/"},
			{"/a%20b/c?d=e&f", "sandbox-x.localhost:8080", "https://sandbox-x.localhost:" + strconv.Itoa(acmetest.Port(t, httpsAddr)) + "/a%20b/c?d=e&f"},
		}
		for _, tt := range tests {
			status, loc := acmetest.Redirect(t, httpAddr, http.MethodGet, "http://"+tt.host+tt.target)
			if status != http.StatusPermanentRedirect || loc != tt.want {
				t.Errorf("%s %s: got %d %q, want 308 %q", tt.host, tt.target, status, loc, tt.want)
			}
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/", nil)
		req.Host = "evil\"host"
		resp, err := acmetest.Client(httpAddr, nil).Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("bad host: got %d, want 400", resp.StatusCode)
			}
		}
	})

	t.Run("curl", func(t *testing.T) {
		curl, err := exec.LookPath("curl")
		if err != nil {
			t.Skip("curl not installed; the Go client above covers the same check")
		}
		caFile := filepath.Join(t.TempDir(), "ca.pem")
		os.WriteFile(caFile, caPEM, 0o644)
		port := strconv.Itoa(acmetest.Port(t, httpsAddr))
		out, err := exec.Command(curl, "-sS", "--fail", "--cacert", caFile,
			"--resolve", "sandbox-x.localhost:"+port+":127.0.0.1",
			"https://sandbox-x.localhost:"+port+"/").CombinedOutput()
		if err != nil || string(out) != "hello from sandbox-x.localhost:"+port {
			t.Errorf("curl: got %v %q, want the app's answer", err, out)
		}
	})
}

// TestSelfSignedCAKept: the CA is created once; a restart and ExportCA use
// the same one.
func TestSelfSignedCAKept(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	if _, err := ExportCA(dataDir); err == nil {
		t.Fatal("ExportCA of an empty data dir: got a CA, want an error")
	}
	m, _, _ := startSelfSigned(t, dataDir, "localhost") // creates it
	_, before := exportPool(t, dataDir)
	_, after := exportPool(t, dataDir)
	if !bytes.Equal(before, after) {
		t.Errorf("CA changed between ExportCA and New")
	}
	m.Close()
	m2, _, _ := startSelfSigned(t, dataDir, "localhost")
	defer m2.Close()
	if _, again := exportPool(t, dataDir); !bytes.Equal(before, again) {
		t.Errorf("CA changed across restarts")
	}
	info, err := os.Stat(filepath.Join(dataDir, "ca", caKeyName))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("CA key file: got %v %v, want mode 0600", info.Mode(), err)
	}
}

// TestSelfSignedRenewal: a leaf within the renewal window is replaced at the
// next handshake.
func TestSelfSignedRenewal(t *testing.T) {
	t.Parallel()
	m, _, _ := startSelfSigned(t, t.TempDir(), testDomain, "localhost")
	s := m.mode.(*selfSignedSource)
	tests := []string{"sandbox-a." + testDomain, "sandbox-a.localhost"}
	for _, host := range tests {
		t.Run(host, func(t *testing.T) {
			hello := &tls.ClientHelloInfo{ServerName: host}
			first, err := s.getCertificate(hello)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := s.getCertificate(hello); again != first {
				t.Errorf("fresh leaf was replaced, want it reused")
			}
			s.now = func() time.Time { return first.Leaf.NotAfter.Add(-leafRenewBefore + time.Minute) }
			defer func() { s.now = time.Now }()
			renewed, err := s.getCertificate(hello)
			if err != nil {
				t.Fatal(err)
			}
			if renewed == first || !renewed.Leaf.NotAfter.After(first.Leaf.NotAfter) {
				t.Errorf("leaf near expiry: got NotAfter %v, want a later one than %v", renewed.Leaf.NotAfter, first.Leaf.NotAfter)
			}
		})
	}
}

func TestModeOff(t *testing.T) {
	t.Parallel()
	m, err := New(Config{TLS: config.TLS{Mode: config.TLSOff}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.TLSConfig() != nil {
		t.Errorf("TLSConfig: got non-nil, want nil with tls off")
	}
	fallback := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	ln := testkit.Listen(t)
	acmetest.Serve(t, ln, m.HTTPHandler(fallback), nil)
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("got %d, want the fallback's 418", resp.StatusCode)
	}
	if _, err := New(Config{TLS: config.TLS{Mode: "bogus"}}, nil); err == nil {
		t.Errorf("unknown mode: got nil error")
	}
}
