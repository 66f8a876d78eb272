package certs

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/acmetest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestFilesReload is done-means 3: replacing the files switches the served
// certificate while a client loop keeps making requests, none failing, and
// a connection opened before the switch keeps working after it.
func TestFilesReload(t *testing.T) {
	t.Parallel()
	ca := acmetest.NewCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	c1, k1 := ca.Leaf(t, 1, "*."+testDomain)
	c2, k2 := ca.Leaf(t, 2, "*."+testDomain)
	writeFiles(t, certFile, c1, keyFile, k1)

	m, err := New(Config{
		TLS:            config.TLS{Mode: config.TLSFiles, CertFile: certFile, KeyFile: keyFile},
		Domains:        []string{testDomain},
		ReloadInterval: 10 * time.Millisecond,
	}, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(m.Close)
	ln := testkit.Listen(t)
	acmetest.Serve(t, ln, appHandler, m.TLSConfig())
	addr := ln.Addr().String()
	host := "sandbox-x." + testDomain

	// A connection made before the switch, used again after it.
	early, err := tls.Dial("tcp", addr, &tls.Config{ServerName: host, RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	earlyReader := bufio.NewReader(early)
	getOn(t, early, earlyReader, host)

	// Every request handshakes anew (no keep-alive), so each one sees the
	// certificate current at that moment.
	client := acmetest.Client(addr, ca.Pool)
	client.Transport.(*http.Transport).DisableKeepAlives = true
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []error
		serials  = map[int64]int{}
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, err := client.Get("https://" + host + "/")
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						failures = append(failures, fmt.Errorf("status %d", resp.StatusCode))
					}
					serials[resp.TLS.PeerCertificates[0].SerialNumber.Int64()]++
				}
				mu.Unlock()
			}
		}()
	}
	seen := func(serial int64) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return serials[serial] > 0
		}
	}
	testkit.WaitFor(t, "requests with the first certificate", seen(1))
	// Not atomic on purpose: for a few reload intervals the new cert sits
	// beside the old key, and the old pair must keep serving meanwhile.
	if err := os.WriteFile(certFile, c2, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := os.WriteFile(keyFile, k2, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "requests with the replaced certificate", seen(2))
	stop.Store(true)
	wg.Wait()

	if len(failures) > 0 {
		t.Errorf("got %d failed requests during the switch, want 0; first: %v", len(failures), failures[0])
	}
	t.Logf("requests per certificate serial: %v", serials)
	getOn(t, early, earlyReader, host)
	if got := early.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); got != 1 {
		t.Errorf("early connection's certificate: got serial %d, want 1", got)
	}
}

func writeFiles(t *testing.T, certFile string, certPEM []byte, keyFile string, keyPEM []byte) {
	t.Helper()
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

// getOn sends one HTTP/1.1 GET on an open connection and wants a 200.
func getOn(t *testing.T, conn *tls.Conn, r *bufio.Reader, host string) {
	t.Helper()
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		t.Fatalf("write on open connection: %v", err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("read on open connection: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("open connection: got status %d, want 200", resp.StatusCode)
	}
}

func TestFilesErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not pem"), 0o644)
	tests := []struct {
		name      string
		cert, key string
	}{
		{"missing names", "", ""},
		{"missing files", filepath.Join(dir, "nope.crt"), filepath.Join(dir, "nope.key")},
		{"not pem", bad, bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{TLS: config.TLS{Mode: config.TLSFiles, CertFile: tt.cert, KeyFile: tt.key}}, nil)
			if err == nil {
				t.Errorf("New: got nil error, want one")
			}
		})
	}
}
