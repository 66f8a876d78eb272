package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// staged is a config file written and synced beside its path, not yet in
// place, with the backup of the file it replaces (nil for a new file):
// publish renames the backup over path+".bak", then the file over path
// (metadata operations, no data written, so the Watcher may do them under
// its lock to order the file with the live config; the directory is
// synced after, without the lock); discard removes both, so a replace
// that does not go live leaves the .bak as it was.
type staged struct {
	tmp, path string
	bak       *staged
}

// stageFile stages data as the file at path (Replace writes the config
// this way): synced beside it and renamed over it by publish, so readers
// (and the Watcher) see either the old or the new file, never a partial
// one. The file it replaces is kept as path+".bak" (a hard link made when
// the new file goes in, else a copy written as the file is). The file
// keeps its permissions, owner and group (the last two where the process
// may set them: as root); a new file gets 0600 because configs may hold
// secrets. A path that is a symlink stays one: the file it points at is
// replaced (its .bak beside it), so the operator's own file keeps
// governing the config.
func stageFile(path string, data []byte) (*staged, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // rename over the link's file, not over the link
	}
	mode := fs.FileMode(0o600)
	var bak *staged
	var owner fs.FileInfo // the replaced file's, kept (keepOwner)
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		if st, err := os.Stat(path); err == nil {
			mode, owner = st.Mode().Perm(), st
		}
		if bak, err = stage(path+".bak", old, mode, owner); err != nil {
			return nil, fmt.Errorf("write config backup: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read config: %w", err)
	}
	s, err := stage(path, data, mode, owner)
	if err != nil {
		if bak != nil {
			bak.discard()
		}
		return nil, fmt.Errorf("write config: %w", err)
	}
	s.bak = bak
	return s, nil
}

func (s *staged) publish() error {
	if s.bak != nil {
		s.bak.linkCurrent(s.path)
		if err := s.bak.publish(); err != nil {
			os.Remove(s.tmp)
			return fmt.Errorf("backup: %w", err)
		}
	}
	if err := os.Rename(s.tmp, s.path); err != nil {
		os.Remove(s.tmp)
		return err
	}
	return nil
}

// linkCurrent makes the backup the file at path as it is now, not as it
// was read at staging: another replace may have gone live in between,
// and the .bak must hold the file this one replaces. A hard link costs no
// data write (publish runs under the Watcher's lock); where the
// filesystem refuses links, the copy staged with the file stays.
func (b *staged) linkCurrent(path string) {
	link := b.tmp + ".link"
	if err := os.Link(path, link); err != nil {
		return
	}
	os.Remove(b.tmp)
	b.tmp = link
}

func (s *staged) discard() {
	if s.bak != nil {
		s.bak.discard()
	}
	os.Remove(s.tmp)
}

func stage(path string, data []byte, mode fs.FileMode, owner fs.FileInfo) (_ *staged, err error) {
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(cmp.Or(dir, "."), "."+base+".tmp-*")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return nil, err
	}
	if err = f.Chmod(mode); err != nil {
		return nil, err
	}
	if owner != nil {
		keepOwner(f, owner)
	}
	if err = f.Sync(); err != nil {
		return nil, err
	}
	return &staged{tmp: tmp, path: path}, f.Close()
}

// syncDir syncs path's directory so a rename into it survives a crash.
func syncDir(path string) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // the directory the rename happened in (stageFile)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
}
