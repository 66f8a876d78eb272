package gateway

import (
	"log/slog"
	"net/http"
	"os"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/h1server"
)

// Server serves preview listeners: internal/h1server's lean HTTP/1.1 loop
// in front of net/http.
type Server = h1server.Server

// ServerOptions are the engine's limits from the config's (defaults
// applied): the one place the file's limits become h1server's options.
func ServerOptions(l config.Limits) h1server.Options {
	return h1server.Options{ReadHeaderTimeout: l.ReadHeaderTimeout.D(), IdleTimeout: l.IdleConnTimeout.D(),
		WriteTimeout: l.WriteTimeout.D(), MaxHeaderBytes: int(l.MaxHeaderBytes),
		BodyTimeout: l.BodyTimeout.D(), BodyMinRate: int64(l.BodyMinRate), Conns: ConnCaps(l)}
}

// ConnCaps are the connection caps of l.
func ConnCaps(l config.Limits) h1server.ConnCaps {
	return h1server.ConnCaps{Max: l.MaxConnections, PerIP: l.ConnectionsPerIP}
}

// NewServer returns the server for h with cfg's connection limits. When h
// is the gateway itself, plain requests to running sandboxes take the lean
// loop (leanRequest decides), unless the environment sets
// PREVIEWGATE_LEAN=off: the switch that runs everything on net/http (CI
// runs the gateway's tests both ways). Any other handler is served by
// net/http alone.
func NewServer(cfg *config.Config, h http.Handler, log *slog.Logger) *Server {
	s := h1server.New(ServerOptions(cfg.Limits), h, log)
	if g, ok := h.(*Gateway); ok && LeanEnabled() {
		s.Lean = g.leanRequest
	}
	return s
}

// LeanEnabled reports whether the lean loop is on (PREVIEWGATE_LEAN is not
// "off").
func LeanEnabled() bool { return os.Getenv("PREVIEWGATE_LEAN") != "off" }
