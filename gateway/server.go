package gateway

import (
	"log/slog"
	"net/http"

	"github.com/previewgate/previewgate/config"
)

// NewServer returns an http.Server for h with the connection limits of cfg:
// ReadHeaderTimeout cuts slowloris clients, IdleTimeout bounds keep-alive,
// MaxHeaderBytes bounds header memory. main and the tests use the same.
func NewServer(cfg *config.Config, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout.D(),
		IdleTimeout:       cfg.Limits.IdleConnTimeout.D(),
		MaxHeaderBytes:    int(cfg.Limits.MaxHeaderBytes),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}
