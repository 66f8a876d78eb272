// Package acmetest runs what certificate tests need in-process: Pebble (a
// real ACME server), an authoritative DNS server that applies TSIG-signed
// RFC 2136 updates, a small CA for "certificates from any tool", and the
// loopback listeners and clients around them. The certs tests use it against
// a stand-in handler, the gateway and main tests against the real gateway.
//
// Everything started here is stopped in t.Cleanup; it listens on loopback
// only and is never used outside tests.
package acmetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// LogWriter writes each line to t.Log until the test ends, and drops them
// afterwards: certmagic and Pebble goroutines may still log after that, and
// t.Log then panics.
func LogWriter(t testing.TB) io.Writer {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

type testWriter struct {
	mu   sync.Mutex // guards done and serializes t.Log
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// Port returns the port of a host:port address.
func Port(t testing.TB, addr string) int {
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

// Serve runs an http.Server for h on ln (TLS when tc is set) until cleanup.
func Serve(t testing.TB, ln net.Listener, h http.Handler, tc *tls.Config) {
	t.Helper()
	srv := &http.Server{Handler: h, TLSConfig: tc, ErrorLog: log.New(LogWriter(t), "http: ", 0)}
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

// Client returns an HTTP client that sends every request to addr, whatever
// the URL's host (which still sets SNI and Host), verifying the server
// against roots. It does not follow redirects.
func Client(addr string, roots *x509.CertPool) *http.Client {
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

// Handshake makes one TLS handshake with addr for serverName, without
// verifying the chain, and returns the leaf the server presented or the
// handshake error.
func Handshake(addr, serverName string) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// Redirect sends method rawURL (its host is the Host header) to the plain
// HTTP listener at addr and returns the status and Location of the answer,
// which is not followed.
func Redirect(t testing.TB, addr, method, rawURL string) (status int, location string) {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Client(addr, nil).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// WantRedirect checks with Redirect that the plain HTTP listener at httpAddr
// answers method rawURL with a 308 to https on the same host, path and
// query, with the port of httpsAddr (none for 443).
func WantRedirect(t testing.TB, httpAddr, httpsAddr, method, rawURL string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Hostname()
	if port := strconv.Itoa(Port(t, httpsAddr)); port != "443" {
		host = net.JoinHostPort(host, port)
	}
	want := "https://" + host + u.RequestURI()
	if status, got := Redirect(t, httpAddr, method, rawURL); status != http.StatusPermanentRedirect || got != want {
		t.Errorf("%s %s: got %d Location %q, want 308 %q", method, rawURL, status, got, want)
	}
}
