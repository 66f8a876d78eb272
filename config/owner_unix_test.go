//go:build unix

package config

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileKeepsOwner: a gateway running as root that writes the
// operator's config (an admin PUT) leaves it, and its .bak, the
// operator's.
func TestWriteFileKeepsOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a privileged process gives a file another owner")
	}
	path := filepath.Join(t.TempDir(), "previewgate.yaml")
	if err := os.WriteFile(path, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	const uid, gid = 12345, 23456
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + ".bak"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != uid || sys.Gid != gid {
			t.Errorf("%s: owner %d:%d, want the operator's %d:%d", filepath.Base(p), sys.Uid, sys.Gid, uid, gid)
		}
	}
}
