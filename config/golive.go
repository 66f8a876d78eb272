package config

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// prepare runs Check, keeps the restart-only settings of the running
// config in c and runs Prepare, without the lock: a reload and a replace
// go live the same way, then commit under it, in the order they began.
// commit and drop are never nil.
func (w *Watcher) prepare(c *Config) (restart []string, commit, drop func(), err error) {
	if w.cfg.Check != nil {
		if err := w.cfg.Check(c); err != nil {
			return nil, nil, nil, err
		}
	}
	old := w.cfg.Store.Load()
	restart = RestartNeeded(old, c)
	if len(restart) > 0 {
		keepRestartOnly(old, c)
	}
	commit, drop = func() {}, func() {}
	if w.cfg.Prepare != nil {
		cm, dr, err := w.cfg.Prepare(c)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("apply config: %w", err)
		}
		if cm != nil {
			commit = cm
		}
		if dr != nil {
			drop = dr
		}
	}
	return restart, commit, drop, nil
}

// commit makes c live unless a newer reload or replace (by gen; 0 means
// now) already did: then the preparation is dropped, file (a replace's
// staged file, if set) removed and c not stored; else file is renamed into
// place with the commit. sum, if set, is the file content c was read from.
func (w *Watcher) commit(gen uint64, c *Config, restart []string, commit, drop func(), msg string, sum *[sha256.Size]byte, file *staged) ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen == 0 { // a replace takes its turn now, with its file's rename
		w.gen++
		gen = w.gen
	}
	if gen < w.live {
		drop()
		if file != nil {
			file.discard()
		}
		w.log.Debug("config superseded by a newer one before it went live")
		return restart, nil
	}
	if file != nil {
		if err := file.publish(); err != nil {
			drop()
			return nil, fmt.Errorf("write config: %w", err)
		}
	}
	commit()
	old := w.cfg.Store.Load()
	if sum != nil {
		w.lastSum, w.haveSum = *sum, true
	}
	w.live = gen
	w.cfg.Store.Store(c)
	w.cfg.OnResult(ResultSuccess)
	w.logChanges(msg, Changed(old, c), restart)
	return restart, nil
}

// logChanges says what a reload or replace changed: the settings now live
// ("changed"), and as a warning those that wait for a restart, running
// values kept. Keys only: a changed secret is named, never shown.
func (w *Watcher) logChanges(msg string, changed, restart []string) {
	live := slices.DeleteFunc(slices.Clone(changed), func(k string) bool {
		return slices.ContainsFunc(restart, func(r string) bool { return k == r || strings.HasPrefix(k, r+".") })
	})
	if len(restart) > 0 {
		w.log.Warn("config changes need a restart to take effect; running values kept", "settings", restart)
	}
	if len(changed) == 0 {
		w.log.Info(msg + ", no setting changed")
		return
	}
	w.log.Info(msg, "changed", live)
}

func (w *Watcher) fail(err error) error {
	w.cfg.OnResult(ResultFailure)
	w.log.LogAttrs(context.Background(), slog.LevelError, "config reload failed, keeping the running config", slog.String("err", err.Error()))
	return err
}
