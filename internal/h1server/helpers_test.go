package h1server

import (
	"net/http/httptest"
	"testing"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

func testConfig() *config.Config {
	c := &config.Config{Domains: config.StringList{"preview.test"}}
	c.ApplyDefaults()
	return c
}

// optionsOf is what gateway.ServerOptions makes of cfg's limits (the
// engine takes resolved values; the tests keep the config's defaults).
func optionsOf(cfg *config.Config) Options {
	l := cfg.Limits
	return Options{ReadHeaderTimeout: l.ReadHeaderTimeout.D(), IdleTimeout: l.IdleConnTimeout.D(),
		WriteTimeout: l.WriteTimeout.D(), MaxHeaderBytes: int(l.MaxHeaderBytes),
		BodyTimeout: l.BodyTimeout.D(), BodyMinRate: int64(l.BodyMinRate),
		Conns: ConnCaps{Max: l.MaxConnections, PerIP: l.ConnectionsPerIP}}
}

// serve runs s on a loopback listener until the test ends. The result is
// an httptest.Server only for its URL, Listener and Close.
func serve(t testing.TB, s *Server) *httptest.Server {
	t.Helper()
	return testkit.ServeOn(t, s, s.HTTP, s.TLSConfig != nil, testkit.Listen(t))
}
