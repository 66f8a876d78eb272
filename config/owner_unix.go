//go:build unix

package config

import (
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives f the owner and group of the file it replaces (st), as
// an editor saving in place would: a gateway running as root does not
// take the operator's file. Only a privileged process can change them;
// otherwise f stays the process's, as before.
func keepOwner(f *os.File, st fs.FileInfo) {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		_ = f.Chown(int(sys.Uid), int(sys.Gid))
	}
}
