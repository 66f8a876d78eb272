package testkit

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Server is a server a test runs on a listener: internal/h1server's Server
// (gateway.Server) is one. Serve returns once Close was called.
type Server interface {
	Serve(net.Listener) error
	Close() error
}

// Listen returns a listener on a free loopback port, closed when the test
// ends.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// ServeOn runs s on ln until the test ends, then closes s and waits for
// Serve to return. hs is the net/http server behind s and tlsOn says
// whether s terminates TLS. The result is an httptest.Server only for its
// URL (https:// when tlsOn), Listener and Close (which closes ln and turns
// hs's keep-alives off; s keeps running until the test ends).
func ServeOn(t testing.TB, s Server, hs *http.Server, tlsOn bool, ln net.Listener) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	scheme := "http://"
	if tlsOn {
		scheme = "https://"
	}
	return &httptest.Server{URL: scheme + ln.Addr().String(), Listener: ln, Config: hs}
}

// DeadAddr returns a loopback address nobody listens on.
func DeadAddr(t testing.TB) string {
	t.Helper()
	ln := Listen(t)
	ln.Close()
	return ln.Addr().String()
}
