package certs

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// benchmarkHandshake measures handshakes per second on the HTTPS listener
// (self-signed mode, ECDSA P-256 leaf, TLS 1.3). Each iteration opens a
// connection, makes one HTTP/1.1 request (which also delivers the session
// ticket) and closes it.
func benchmarkHandshake(b *testing.B, resume bool) {
	dataDir := b.TempDir()
	_, httpsAddr, _ := startSelfSigned(b, dataDir, "localhost")
	caPEM, err := ExportCA(dataDir)
	if err != nil {
		b.Fatal(err)
	}
	cfg := &tls.Config{ServerName: "sandbox-bench.localhost", NextProtos: []string{"http/1.1"}}
	cfg.RootCAs = poolOf(b, caPEM)
	if resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
		roundTrip(b, httpsAddr, cfg) // prime the ticket
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if did := roundTrip(b, httpsAddr, cfg); did != resume {
			b.Fatalf("DidResume: got %v, want %v", did, resume)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "handshakes/s")
}

func roundTrip(b *testing.B, addr string, cfg *tls.Config) (didResume bool) {
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", cfg.ServerName)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return conn.ConnectionState().DidResume
}

func BenchmarkHandshakeFull(b *testing.B)    { benchmarkHandshake(b, false) }
func BenchmarkHandshakeResumed(b *testing.B) { benchmarkHandshake(b, true) }

func poolOf(b *testing.B, caPEM []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		b.Fatal("no CA certificate")
	}
	return pool
}
