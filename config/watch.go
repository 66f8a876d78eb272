package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Reload results reported to WatcherConfig.OnResult.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// Path is the config file. Its directory is watched, so editors that
	// save by writing a new file and renaming it over the old one (and
	// Kubernetes ConfigMap symlink swaps) are seen.
	Path string
	// Store receives each new valid config. It must hold the running config.
	Store *Store
	// Apply, if set, is called with a new valid config before it is stored
	// (the gateway builds its route table there). An error fails the reload
	// and nothing is stored. Apply calls never overlap.
	Apply func(*Config) error
	// OnResult, if set, is called with ResultSuccess or ResultFailure after
	// each reload attempt (for metrics). Unchanged files are not attempts.
	OnResult func(result string)
	// Debounce is how long the directory must be quiet after an event
	// before the file is read. Zero means 200ms.
	Debounce time.Duration
}

// Watcher reloads the config file when it changes or when Reload is called.
// A file that fails to parse, validate or apply is logged and the old config
// keeps serving. Settings that need a restart keep their running values and
// are logged as a warning.
type Watcher struct {
	cfg    WatcherConfig
	log    *slog.Logger
	fw     *fsnotify.Watcher // nil when events come from a test
	events <-chan fsnotify.Event
	errs   <-chan error
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu      sync.Mutex // guards lastSum and serializes reloads and Apply calls
	lastSum [sha256.Size]byte
	haveSum bool
}

// NewWatcher starts watching cfg.Path's directory. Close stops it.
func NewWatcher(cfg WatcherConfig, log *slog.Logger) (*Watcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("config watcher: no store")
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("config watcher: %w", err)
	}
	if err := fw.Add(filepath.Dir(cfg.Path)); err != nil {
		fw.Close()
		return nil, fmt.Errorf("config watcher: watch %s: %w", filepath.Dir(cfg.Path), err)
	}
	w := newWatcher(cfg, log, fw.Events, fw.Errors)
	w.fw = fw
	return w, nil
}

func newWatcher(cfg WatcherConfig, log *slog.Logger, events <-chan fsnotify.Event, errs <-chan error) *Watcher {
	if cfg.Debounce <= 0 {
		cfg.Debounce = 200 * time.Millisecond
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		cfg: cfg, log: log.With("config", cfg.Path),
		events: events, errs: errs,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go w.loop()
	return w
}

// Close stops watching and waits for the watcher's goroutine. A reload in
// progress finishes first.
func (w *Watcher) Close() error {
	var err error
	w.once.Do(func() {
		close(w.stop)
		if w.fw != nil {
			err = w.fw.Close()
		}
		<-w.done
	})
	return err
}

func (w *Watcher) loop() {
	defer close(w.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-w.stop:
			return
		case _, ok := <-w.events:
			if !ok {
				return
			}
			// Any event in the directory restarts the quiet period; the file
			// is read only after it. Unchanged content is skipped by reload.
			timer.Reset(w.cfg.Debounce)
		case err, ok := <-w.errs:
			if !ok {
				return
			}
			w.log.Warn("config watch error", "err", err)
		case <-timer.C:
			w.reload(false) //nolint:errcheck // logged and reported inside
		}
	}
}

// Reload reads the file now, even if its content did not change (SIGHUP),
// and applies it if valid. The error is what was logged.
func (w *Watcher) Reload() error {
	return w.reload(true)
}

func (w *Watcher) reload(force bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := os.ReadFile(w.cfg.Path)
	if err != nil {
		return w.failLocked(fmt.Errorf("read config: %w", err))
	}
	sum := sha256.Sum256(data)
	if !force && w.haveSum && sum == w.lastSum {
		return nil // an event elsewhere in the directory, or a no-op write
	}
	w.lastSum, w.haveSum = sum, true
	c, err := Parse(w.cfg.Path, data)
	if err != nil {
		return w.failLocked(err)
	}
	_, err = w.applyLocked(c)
	return err
}

// Replace validates data as the new content of the file, applies it, writes
// it atomically (keeping a .bak) and stores it: the admin PUT. On any error
// neither the file nor the live config changes; a validation error is an
// ErrorList. It returns the changed settings that need a restart.
func (w *Watcher) Replace(data []byte) ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, err := Parse(w.cfg.Path, data)
	if err != nil {
		return nil, err // a rejected PUT is the caller's to report, not a reload failure
	}
	old := w.cfg.Store.Load()
	restart := RestartNeeded(old, c)
	if len(restart) > 0 {
		keepRestartOnly(old, c)
	}
	if w.cfg.Apply != nil {
		if err := w.cfg.Apply(c); err != nil {
			return nil, fmt.Errorf("apply config: %w", err)
		}
	}
	if err := WriteFile(w.cfg.Path, data); err != nil {
		if w.cfg.Apply != nil {
			if rerr := w.cfg.Apply(old); rerr != nil {
				w.log.Error("config: re-applying the old config failed", "err", rerr)
			}
		}
		return nil, err
	}
	w.lastSum, w.haveSum = sha256.Sum256(data), true
	w.cfg.Store.Store(c)
	w.report(ResultSuccess)
	if len(restart) > 0 {
		w.log.Warn("config changes need a restart to take effect", "settings", restart)
	}
	w.log.Info("config replaced")
	return restart, nil
}

// applyLocked runs Apply and stores c. w.mu must be held.
func (w *Watcher) applyLocked(c *Config) ([]string, error) {
	old := w.cfg.Store.Load()
	restart := RestartNeeded(old, c)
	if len(restart) > 0 {
		keepRestartOnly(old, c)
	}
	if w.cfg.Apply != nil {
		if err := w.cfg.Apply(c); err != nil {
			return nil, w.failLocked(fmt.Errorf("apply config: %w", err))
		}
	}
	w.cfg.Store.Store(c)
	w.report(ResultSuccess)
	if len(restart) > 0 {
		w.log.Warn("config changes need a restart to take effect; running values kept", "settings", restart)
	}
	w.log.Info("config reloaded")
	return restart, nil
}

func (w *Watcher) failLocked(err error) error {
	w.report(ResultFailure)
	w.log.LogAttrs(context.Background(), slog.LevelError, "config reload failed, keeping the running config", slog.String("err", err.Error()))
	return err
}

func (w *Watcher) report(result string) {
	if w.cfg.OnResult != nil {
		w.cfg.OnResult(result)
	}
}
