package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path with data atomically: data goes to a
// temporary file in the same directory, is synced and renamed over path, so
// readers (and the Watcher) see either the old or the new file, never a
// partial one. The previous content is kept as path+".bak" (written the
// same way). The file keeps its permissions; a new file gets 0600 because
// configs may hold secrets.
func WriteFile(path string, data []byte) error {
	mode := fs.FileMode(0o600)
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
		if err := writeAtomic(path+".bak", old, mode); err != nil {
			return fmt.Errorf("write config backup: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read config: %w", err)
	}
	if err := writeAtomic(path, data, mode); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}

func writeAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// Sync the directory so the rename survives a crash.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
