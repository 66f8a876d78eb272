package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
)

// DevKeyFile is where the development default keeps its signing key,
// inside its data dir: tokens and cookies from one run keep working after
// a restart, and `token mint` without --config signs with it.
const DevKeyFile = "dev-key.json"

// storedKey is the file's format.
type storedKey struct {
	KID    string `json:"kid"`
	Alg    string `json:"alg"`
	Secret string `json:"secret"`
}

// devKey returns the key kept in dataDir, making it on first use.
func devKey(dataDir string) (config.Key, error) {
	return keepOnce(filepath.Join(dataDir, DevKeyFile), "development key", func() (config.Key, error) { return ReadDevKey(dataDir) },
		func() (config.Key, []byte) {
			k := auth.NewDevKey()
			data, _ := json.Marshal(storedKey{KID: k.KID, Alg: k.Alg, Secret: string(k.Secret)})
			return k, append(data, '\n')
		})
}

// keepOnce returns what read makes of the file at path, first creating
// it with create's bytes if there is none. It is only ever created
// (O_EXCL): of two gateways starting on one data dir, both end up with
// the first one's. what names the file in errors.
func keepOnce[T any](path, what string, read func() (T, error), create func() (T, []byte)) (T, error) {
	var zero T
	for range 2 {
		v, err := read()
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return v, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return zero, fmt.Errorf("%s: %w", what, err)
		}
		v, data := create()
		err = WriteNew(path, data)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return zero, fmt.Errorf("%s: %w", what, err)
		}
		return v, nil
	}
	return zero, fmt.Errorf("%s: %s keeps changing", what, path)
}

// WriteNew creates path with data, mode 0600. It never overwrites a file
// (an error wrapping fs.ErrExist), and a failed write leaves none.
func WriteNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// ReadDevKey reads the key kept in dataDir; an error wrapping
// fs.ErrNotExist when there is none yet.
func ReadDevKey(dataDir string) (config.Key, error) {
	path := filepath.Join(dataDir, DevKeyFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return config.Key{}, fmt.Errorf("development key: %w", err)
	}
	var s storedKey
	if err := json.Unmarshal(data, &s); err != nil || s.KID == "" || s.Alg != "HS256" || len(s.Secret) < 32 {
		return config.Key{}, fmt.Errorf("development key in %s is damaged (remove it to make a new one; tokens signed with it stop working)", path)
	}
	return config.Key{KID: s.KID, Alg: s.Alg, Secret: config.Secret(s.Secret)}, nil
}

// devListenFile is where the development gateway notes the preview
// listener and domain it serves: its flags may move them (--http,
// --domain), and `token mint` without --config prints a URL that opens
// on the running gateway, not on the default port.
const devListenFile = "dev-listen.json"

type devListen struct {
	HTTP   string `json:"http"`
	Domain string `json:"domain"`
}

// writeDevListen notes cfg's preview listener and domain in its data dir.
func writeDevListen(cfg *config.Config) error {
	data, _ := json.Marshal(devListen{HTTP: cfg.Listen.HTTP, Domain: cfg.Domains[0]})
	path := filepath.Join(cfg.DataDir, devListenFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("note the development listener: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("note the development listener: %w", err)
	}
	return nil
}

// ReadDevListen puts the listener and domain the development gateway
// last served (writeDevListen) into cfg; without a note, cfg is left as
// it is (the defaults).
func ReadDevListen(cfg *config.Config) {
	data, err := os.ReadFile(filepath.Join(cfg.DataDir, devListenFile))
	if err != nil {
		return
	}
	var l devListen
	if json.Unmarshal(data, &l) != nil || l.HTTP == "" || l.Domain == "" {
		return
	}
	cfg.Listen.HTTP, cfg.Domains = l.HTTP, config.StringList{l.Domain}
}
