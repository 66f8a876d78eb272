package certs

import (
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/previewgate/previewgate/internal/testing/acmetest"
)

// testLogger returns a slog.Logger writing to t.Log until the test ends
// (certmagic and pebble goroutines may still log after that).
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(acmetest.LogWriter(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// appHandler stands in for the gateway: 200 with the host it saw. The
// gateway's own tests put the real handler behind these listeners.
var appHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "hello from "+r.Host)
})
