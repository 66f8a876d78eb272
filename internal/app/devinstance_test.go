package app

import (
	"os"
	"path/filepath"
	"testing"
)

// The development default's instance label is kept per data dir: a restart
// keeps it (and so its sandboxes), another data dir gets another one.
func TestDevInstanceID(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	a, err := devInstanceID(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := devInstanceID(dir)
	if err != nil || again != a {
		t.Errorf("got %q, %v on the second call, want %q", again, err, a)
	}
	other, err := devInstanceID(t.TempDir())
	if err != nil || other == a || len(other) != 16 {
		t.Errorf("got %q, %v for another data dir, want another 16-hex id than %q", other, err, a)
	}
	if err := os.WriteFile(filepath.Join(dir, "instance-id"), []byte("x y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := devInstanceID(dir); err == nil {
		t.Error("got no error for a malformed instance-id, want one")
	}
}
