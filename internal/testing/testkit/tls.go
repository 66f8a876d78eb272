package testkit

import (
	"crypto/tls"
	"net/http/httptest"
	"sync"
)

// TLSConfig serves httptest's self-signed certificate with the given ALPN
// protocols.
func TLSConfig(protos ...string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{testCert()}, NextProtos: protos}
}

var testCert = sync.OnceValue(func() tls.Certificate {
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	defer ts.Close()
	return ts.TLS.Certificates[0]
})
