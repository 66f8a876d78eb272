package h1server

import (
	"net/http/httptest"
	"testing"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testkit"
)

func testConfig() *config.Config {
	c := &config.Config{Domains: config.StringList{"preview.test"}}
	c.ApplyDefaults()
	return c
}

// serve runs s on a loopback listener until the test ends. The result is
// an httptest.Server only for its URL, Listener and Close.
func serve(t testing.TB, s *Server) *httptest.Server {
	t.Helper()
	return testkit.ServeOn(t, s, s.HTTP, s.TLSConfig != nil, testkit.Listen(t))
}
