package config

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
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
	// Prepare, if set, builds what a new valid config needs before it goes
	// live (the gateway's route table, with its JWKS fetch). It may take
	// seconds, so it runs without the watcher's lock: calls may overlap and
	// must not change what serves. It returns commit, which makes the
	// prepared state live: called under the lock, in reload order, it must
	// not block. drop releases a preparation that was overtaken by a newer
	// config and never committed. An error fails the reload.
	Prepare func(*Config) (commit, drop func(), err error)
	// OnResult, if set, is called with ResultSuccess or ResultFailure after
	// each reload attempt (for metrics). Unchanged files are not attempts.
	OnResult func(result string)
	// Check, if set, sees each new config as its text has it, before the
	// running values of restart-only settings are kept in it (Prepare
	// sees those): what it refuses (files the text names that cannot be
	// read, say) fails the reload or the replace, its error as it is. A
	// file that sets nothing new is not checked.
	Check func(*Config) error
	// Override, if set, is applied to each new config after it is read
	// and validated, before it is compared and applied: settings the
	// command line gives win over the file (serve --domain). It must leave
	// the config valid.
	Override func(*Config)
	// Debounce is how long the directory must be quiet after an event
	// before the file is read. Zero means 200ms.
	Debounce time.Duration
}

// Watcher reloads the config file when it changes or when Reload is called.
// A file that fails to parse, validate or apply is logged and the old config
// keeps serving. Settings that need a restart keep their running values and
// are logged as a warning.
//
// No lock is held across reading or writing the file, nor across Prepare
// (a JWKS fetch may take seconds), so a SIGHUP reload never waits for an
// admin PUT (#25). Reloads and replaces take turns instead: one overtaken
// by a newer one going live is dropped, so the live config is always that
// of the latest file.
type Watcher struct {
	cfg    WatcherConfig
	log    *slog.Logger
	fw     *fsnotify.Watcher // nil when events come from a test
	target string            // the file cfg.Path links to, in another directory also watched; "" if none
	events <-chan fsnotify.Event
	errs   <-chan error
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	// mu guards lastSum, gen and live, and serializes commits and stores. It is never held across I/O: files are read and
	// written, and Prepare runs, outside it (#25).
	mu      sync.Mutex
	lastSum [sha256.Size]byte
	haveSum bool
	gen     uint64 // numbers the reloads and replaces, in the order they began
	live    uint64 // gen of the config in the store
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
	// A path that is a symlink into another directory (the operator's
	// file kept in a checkout): edits of the file it points at happen
	// there. Kubernetes' ConfigMap links are followed by "..data" instead
	// (concerns), so a target under a "..<timestamp>" directory is not.
	target := ""
	if real, err := filepath.EvalSymlinks(cfg.Path); err == nil && filepath.Dir(real) != filepath.Dir(cfg.Path) &&
		!strings.HasPrefix(filepath.Base(filepath.Dir(real)), "..") {
		if err := fw.Add(filepath.Dir(real)); err != nil {
			log.Warn("config watcher: edits of the file the config path links to are seen on SIGHUP only", "file", real, "err", err)
		} else {
			target = real
		}
	}
	w := buildWatcher(cfg, log, fw.Events, fw.Errors)
	w.fw, w.target = fw, target // before the loop starts: it reads them
	go w.loop()
	return w, nil
}

func buildWatcher(cfg WatcherConfig, log *slog.Logger, events <-chan fsnotify.Event, errs <-chan error) *Watcher {
	if cfg.Debounce <= 0 {
		cfg.Debounce = 200 * time.Millisecond
	}
	if cfg.Override == nil {
		cfg.Override = func(*Config) {}
	}
	if cfg.OnResult == nil {
		cfg.OnResult = func(string) {}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{
		cfg: cfg, log: log.With("config", cfg.Path),
		events: events, errs: errs,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
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
		case ev, ok := <-w.events:
			if !ok {
				return
			}
			if !w.concerns(ev) {
				continue // another file in the directory
			}
			// An event restarts the quiet period; the file is read only
			// after it. Unchanged content is skipped by reload.
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

// concerns reports whether ev may have changed the config file: an event
// on its name (a write, or a file renamed over it), or on "..data", the
// symlink Kubernetes swaps to update a mounted ConfigMap, or on the file
// the path links to (target). Other files in the directories (editor
// swap files, the .bak of Replace) are not.
func (w *Watcher) concerns(ev fsnotify.Event) bool {
	name := filepath.Base(ev.Name)
	if w.target != "" && filepath.Dir(ev.Name) == filepath.Dir(w.target) {
		return name == filepath.Base(w.target)
	}
	return name == filepath.Base(w.cfg.Path) || name == "..data"
}

// Reload reads the file now, even if its content did not change (SIGHUP),
// and applies it if valid. The error is what was logged.
func (w *Watcher) Reload() error {
	return w.reload(true)
}

func (w *Watcher) reload(force bool) error {
	// The turn is taken before the read: a replace that renames its file
	// after this read commits with a later turn, and this reload, older,
	// is dropped.
	w.mu.Lock()
	w.gen++
	gen := w.gen
	w.mu.Unlock()
	data, err := readFile(w.cfg.Path)
	if err != nil {
		return w.fail(fmt.Errorf("read config: %w", err))
	}
	sum := sha256.Sum256(data)
	w.mu.Lock()
	if gen < w.live || !force && w.haveSum && sum == w.lastSum {
		w.mu.Unlock()
		return nil // overtaken, an event elsewhere in the directory, or a no-op write
	}
	w.lastSum, w.haveSum = sum, true
	w.mu.Unlock()
	c, err := Parse(w.cfg.Path, data)
	if err != nil {
		return w.fail(err)
	}
	w.cfg.Override(c)
	if live := w.cfg.Store.Load(); !force && len(Changed(live, c)) == 0 {
		// Rewritten with the same settings (comments, order, a
		// restart-only edit taken back): not a reload, nothing to say
		// above debug. Yet the text is the file's now: GET /admin/config
		// shows it, and a PUT of what it showed must not write back the
		// old one.
		w.log.Debug("config file rewritten, no setting changed")
		if w.keepText(gen, live, c) {
			return nil
		}
		// An older reload went live since the comparison: this file,
		// newer, differs from it and is applied like any change.
	}
	restart, commit, drop, err := w.prepare(c)
	if err != nil {
		return w.fail(err)
	}
	if _, err := w.commit(gen, c, restart, commit, drop, "config reloaded", nil, nil); err != nil {
		return w.fail(err)
	}
	return nil
}

// keepText stores c, whose settings are those of live, as the live
// config, for the text it was read from; nothing is applied. A newer
// reload or replace (by gen) wins. It reports false, storing nothing, if
// the config live is no longer live: an older reload went live since c
// was compared with it, and storing c would show settings that are not
// the ones applied.
func (w *Watcher) keepText(gen uint64, live, c *Config) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen < w.live {
		return true
	}
	if w.cfg.Store.Load() != live {
		return false
	}
	// c's restart-only settings are already live's: Changed compared
	// every setting (a list left out and one written empty are the same
	// to it, as to every reader).
	w.live = gen
	w.cfg.Store.Store(c)
	return true
}

// Replace validates data as the new content of the file, applies it, writes
// it atomically (keeping a .bak) and stores it: the admin PUT. A secret or
// env value written as REDACTED keeps the running one (ParseUpdate), and
// the file gets the text that value was read from. On any error neither
// the file nor the live config changes; a validation error is an
// ErrorList. It returns the changed settings that need a restart.
func (w *Watcher) Replace(data []byte) ([]string, error) {
	c, data, err := ParseUpdate(w.cfg.Path, data, w.cfg.Store.Load())
	if err != nil {
		return nil, err // a rejected PUT is the caller's to report, not a reload failure
	}
	w.cfg.Override(c)
	restart, commit, drop, err := w.prepare(c)
	if err != nil {
		return nil, err
	}
	// The file is written and synced now; only its rename waits for the
	// lock, so the file and the live config change together.
	file, err := stageFile(w.cfg.Path, data)
	if err != nil {
		drop()
		return nil, err
	}
	sum := sha256.Sum256(data)
	restart, err = w.commit(0, c, restart, commit, drop, "config replaced", &sum, file)
	syncDir(w.cfg.Path) // the rename, made under the lock, survives a crash
	return restart, err
}
