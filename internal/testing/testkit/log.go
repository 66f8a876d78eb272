package testkit

import (
	"log/slog"
	"os"
	"testing"
)

// Logger returns the logger tests hand to the code under test: silent,
// unless the tests run with -v, then everything down to debug on stderr.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
