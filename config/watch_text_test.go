package config

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestWatcherKeepsTheFileText: a file change that leaves every setting
// as it runs (a comment edited, a restart-only edit taken back) is not a
// reload, but the live config's text is the file's now: GET
// /admin/config (RedactedSource) showed the old text, and a PUT of it
// wrote back an edit the operator had undone.
func TestWatcherKeepsTheFileText(t *testing.T) {
	t.Parallel()
	path, store := setup(t)
	w := newWatcher(WatcherConfig{Path: path, Store: store}, slog.New(slog.DiscardHandler), nil, nil)
	defer w.Close()
	shown := func() string {
		t.Helper()
		b, err := store.Load().RedactedSource()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := w.reload(false); err != nil { // as a file event does
			t.Fatal(err)
		}
	}
	moved := strings.Replace(fileWith(10), "limits:", "listen: {admin: \"127.0.0.1:9999\"}\nlimits:", 1)
	write(moved)
	if !strings.Contains(shown(), "127.0.0.1:9999") || store.Load().Listen.Admin != "127.0.0.1:9090" {
		t.Fatalf("after a restart-only edit: admin %s, shown\n%s\nwant the running address kept and the file shown", store.Load().Listen.Admin, shown())
	}
	write(fileWith(10)) // taken back
	if strings.Contains(shown(), "127.0.0.1:9999") {
		t.Errorf("after the edit was taken back, GET shows\n%s\nwant the file as it is", shown())
	}
	write(fileWith(10) + "# a note\n")
	if !strings.Contains(shown(), "# a note") {
		t.Errorf("after a comment was added, GET shows\n%s\nwant the comment", shown())
	}
	if c := store.Load(); c.Listen.Admin != "127.0.0.1:9090" || c.Limits.MaxRunning != 10 {
		t.Errorf("settings changed: admin %s max_running %d", c.Listen.Admin, c.Limits.MaxRunning)
	}
}

// holdAt is a slog handler that holds the first record with message msg:
// it says so on reached and returns once release is closed. A point
// inside a reload, between two of its steps, under the test's control.
type holdAt struct {
	msg     string
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (h *holdAt) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdAt) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() {
			close(h.reached)
			<-h.release
		})
	}
	return nil
}
func (h *holdAt) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *holdAt) WithGroup(string) slog.Handler      { return h }

// TestWatcherKeepTextAfterAnOlderReloadWentLive: a reload that finds no
// setting changed compares the file with the live config without the
// lock; an older reload (max_running 20, its Prepare slow) may go live
// between that comparison and the store of the text. The store then held
// the newer file's config (10) while 20 was what had been applied: GET
// /admin/config, the metrics and every reader of the store saw settings
// the gateway did not run. The file is 10, so 10 must be both applied and
// stored.
func TestWatcherKeepTextAfterAnOlderReloadWentLive(t *testing.T) {
	t.Parallel()
	path, store := setup(t) // max_running 10, live
	rec := newRecorder()
	preparing, prepared := make(chan struct{}), make(chan struct{})
	prepare := func(c *Config) (func(), func(), error) {
		if c.Limits.MaxRunning == 20 {
			close(preparing)
			<-prepared
		}
		return rec.prepare(c)
	}
	h := &holdAt{msg: "config file rewritten, no setting changed", reached: make(chan struct{}), release: make(chan struct{})}
	w := newWatcher(WatcherConfig{Path: path, Store: store, Prepare: prepare}, slog.New(h), nil, nil)
	defer w.Close()
	released := false
	defer func() { // never leave a reload held, also on failure
		if !released {
			close(h.release)
		}
	}()
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	write(fileWith(20))
	older := make(chan error, 1)
	go func() { older <- w.reload(false) }()
	<-preparing // the older reload read 20 and prepares it

	write(fileWith(10)) // the edit taken back
	newer := make(chan error, 1)
	go func() { newer <- w.reload(false) }()
	<-h.reached // the newer reload compared 10 with the live 10: no change

	close(prepared)
	if err := <-older; err != nil {
		t.Fatalf("older reload: %v", err)
	}
	close(h.release)
	released = true
	if err := <-newer; err != nil {
		t.Fatalf("newer reload: %v", err)
	}

	rec.mu.Lock()
	applied := slices.Clone(rec.applied)
	rec.mu.Unlock()
	if got := store.Load().Limits.MaxRunning; len(applied) == 0 || got != applied[len(applied)-1] || got != 10 {
		t.Fatalf("store says max_running %d, applied %v; want the file's 10, applied last", got, applied)
	}
}
