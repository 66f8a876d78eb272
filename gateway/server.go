package gateway

import (
	"log/slog"

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

// NewServer returns the server of a preview listener serving g, with
// cfg's connection limits. Plain HTTP/1.1 requests take the lean loop
// (leanShape says which), unless g was made with Options.NetHTTPOnly;
// everything else, and HTTP/2, is net/http's. Both call g.ServeHTTP,
// which decides the request once.
func NewServer(cfg *config.Config, g *Gateway, log *slog.Logger) *Server {
	s := h1server.New(ServerOptions(cfg.Limits), g, log)
	if !g.netHTTPOnly {
		s.Lean = leanShape
	}
	return s
}
