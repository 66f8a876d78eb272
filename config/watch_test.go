package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
)

// fileWith returns a valid config whose limits.max_running is n (a setting
// reload applies), so tests can tell versions apart.
func fileWith(n int) string { return base + fmt.Sprintf("limits: {max_running: %d}\n", n) }

// recorder collects the configs that go live (its prepare's commits) and
// reload results.
type recorder struct {
	mu      sync.Mutex
	applied []int // max_running of each applied config
	results []string
	fail    error // returned by prepare when set
	events  chan string
}

func newRecorder() *recorder { return &recorder{events: make(chan string, 100)} }

func (r *recorder) prepare(c *Config) (commit, drop func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return nil, nil, r.fail
	}
	return func() {
		r.mu.Lock()
		r.applied = append(r.applied, c.Limits.MaxRunning)
		r.mu.Unlock()
	}, nil, nil
}

func (r *recorder) onResult(res string) {
	r.mu.Lock()
	r.results = append(r.results, res)
	r.mu.Unlock()
	r.events <- res
}

func (r *recorder) snapshot() ([]int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.applied...), append([]string(nil), r.results...)
}

// setup writes the initial file and returns its path and a store holding it.
func setup(t *testing.T) (string, *Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "previewgate.yaml")
	if err := os.WriteFile(path, []byte(fileWith(10)), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, NewStore(c)
}

// next waits for the next reload result. The deadline only turns a hang into
// a failure; it asserts nothing about speed.
func (r *recorder) next(t *testing.T) string {
	t.Helper()
	select {
	case res := <-r.events:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("no reload happened")
		return ""
	}
}

func TestWatcherFileChanges(t *testing.T) {
	t.Parallel()
	path, store := setup(t)
	rec := newRecorder()
	w, err := NewWatcher(WatcherConfig{Path: path, Store: store, Prepare: rec.prepare, OnResult: rec.onResult, Debounce: 20 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	renameOver := func(s string) {
		t.Helper()
		tmp := filepath.Join(filepath.Dir(path), ".edit.swp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}

	steps := []struct {
		name    string
		do      func()
		result  string
		running int // live max_running afterwards
	}{
		{"valid write", func() { write(fileWith(11)) }, ResultSuccess, 11},
		{"invalid write", func() { write(fileWith(12) + "bogus: 1\n") }, ResultFailure, 11},
		{"rename over", func() { renameOver(fileWith(13)) }, ResultSuccess, 13},
		{"invalid rename over", func() { renameOver("domain: [\n") }, ResultFailure, 13},
		{"atomic WriteFile", func() {
			if err := WriteFile(path, []byte(fileWith(14))); err != nil {
				t.Fatal(err)
			}
		}, ResultSuccess, 14},
	}
	for _, s := range steps {
		s.do()
		if got := rec.next(t); got != s.result {
			t.Fatalf("%s: got result %s, want %s", s.name, got, s.result)
		}
		if got := store.Load().Limits.MaxRunning; got != s.running {
			t.Errorf("%s: got live max_running %d, want %d", s.name, got, s.running)
		}
	}
	applied, _ := rec.snapshot()
	if want := []int{11, 13, 14}; !slices.Equal(applied, want) {
		t.Errorf("got applied %v, want %v", applied, want)
	}
}

func TestWatcherPrepareError(t *testing.T) {
	t.Parallel()
	path, store := setup(t)
	before := store.Load()
	rec := newRecorder()
	rec.fail = errors.New("route table rejected")
	w := newWatcher(WatcherConfig{Path: path, Store: store, Prepare: rec.prepare, OnResult: rec.onResult}, nil, nil, nil)
	defer w.Close()
	if err := os.WriteFile(path, []byte(fileWith(11)), 0o600); err != nil {
		t.Fatal(err)
	}
	err := w.Reload()
	if err == nil || !strings.Contains(err.Error(), "route table rejected") {
		t.Errorf("got %v, want the prepare error", err)
	}
	if store.Load() != before {
		t.Error("got a new live config, want the old one kept")
	}
	if _, results := rec.snapshot(); strings.Join(results, ",") != ResultFailure {
		t.Errorf("got results %v, want [failure]", results)
	}
}

// TestWatcherDebounce feeds events by hand inside a synctest bubble: a burst
// of events gives one reload after the quiet period.
func TestWatcherDebounce(t *testing.T) {
	t.Parallel()
	path, store := setup(t)
	synctest.Test(t, func(t *testing.T) {
		events := make(chan fsnotify.Event)
		rec := newRecorder()
		w := newWatcher(WatcherConfig{Path: path, Store: store, Prepare: rec.prepare, OnResult: rec.onResult, Debounce: 200 * time.Millisecond}, nil, events, nil)
		defer w.Close()

		if err := os.WriteFile(path, []byte(fileWith(11)), 0o600); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
			time.Sleep(150 * time.Millisecond) // shorter than the debounce
			synctest.Wait()
			if _, results := rec.snapshot(); len(results) != 0 {
				t.Fatalf("got %d reloads during the burst, want 0", len(results))
			}
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if _, results := rec.snapshot(); len(results) != 1 {
			t.Fatalf("got %d reloads after the burst, want 1", len(results))
		}

		// An event that leaves the file unchanged is not a reload...
		events <- fsnotify.Event{Name: path + ".bak", Op: fsnotify.Create}
		time.Sleep(time.Second)
		synctest.Wait()
		if _, results := rec.snapshot(); len(results) != 1 {
			t.Errorf("got %d reloads after a no-op event, want 1", len(results))
		}
		// ...but SIGHUP (Reload) always is.
		if err := w.Reload(); err != nil {
			t.Fatal(err)
		}
		if _, results := rec.snapshot(); len(results) != 2 {
			t.Errorf("got %d reloads after Reload, want 2", len(results))
		}
	})
}

func TestWatcherRestartNeededKeepsRunningValues(t *testing.T) {
	t.Parallel()
	path, store := setup(t)
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	w := newWatcher(WatcherConfig{Path: path, Store: store}, log, nil, nil)
	defer w.Close()
	if err := os.WriteFile(path, []byte(base+"listen: {admin: \"127.0.0.1:9999\"}\nlimits: {max_running: 7}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	c := store.Load()
	if c.Listen.Admin != "127.0.0.1:9090" || c.Limits.MaxRunning != 7 {
		t.Errorf("got admin %s max_running %d, want the running admin address and the new limit", c.Listen.Admin, c.Limits.MaxRunning)
	}
	if !strings.Contains(logs.String(), "need a restart") || !strings.Contains(logs.String(), "listen.admin") {
		t.Errorf("got log %q, want a restart warning naming listen.admin", logs.String())
	}
}

// TestWatcherWildcardDomainNeedsRestart: with wildcard certificates a
// reload that adds a domain says it needs a restart (the log the operator
// reads; the admin PUT returns the same list) and keeps serving the running
// domains, while the rest of the file applies.
func TestWatcherWildcardDomainNeedsRestart(t *testing.T) {
	t.Parallel()
	const tls = "tls:\n  mode: acme\n  acme:\n    strategy: wildcard\n" +
		"    rfc2136: {server: \"127.0.0.1:53\", tsig_key: k., tsig_secret: c2VjcmV0}\n"
	path := filepath.Join(t.TempDir(), "previewgate.yaml")
	if err := os.WriteFile(path, []byte(realBase+tls), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(c)
	var logs strings.Builder
	rec := newRecorder()
	w := newWatcher(WatcherConfig{Path: path, Store: store, Prepare: rec.prepare}, slog.New(slog.NewTextHandler(&logs, nil)), nil, nil)
	defer w.Close()
	next := strings.Replace(realBase, "domain: preview.example.com", "domain: [preview.example.com, preview.example.org]", 1)
	restart, err := w.Replace([]byte(next + tls + "limits: {max_running: 7}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(restart, []string{"domain"}) {
		t.Errorf("got restart %v, want [domain]", restart)
	}
	if got := store.Load(); !slices.Equal(got.Domains, []string{"preview.example.com"}) || got.Limits.MaxRunning != 7 {
		t.Errorf("got domains %v max_running %d, want the running domain and the new limit", got.Domains, got.Limits.MaxRunning)
	}
	if applied, _ := rec.snapshot(); !slices.Equal(applied, []int{7}) {
		t.Errorf("got applied %v, want [7]", applied)
	}
	if !strings.Contains(logs.String(), "need a restart") || !strings.Contains(logs.String(), "domain") {
		t.Errorf("got log %q, want a restart warning naming domain", logs.String())
	}
}

func TestWatcherReplace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		data     string
		applyErr error
		wantErr  string
		wantFile string // "" means unchanged
	}{
		{"valid", fileWith(9), nil, "", "max_running: 9}"},
		{"invalid", fileWith(10) + "bogus: 1\n", nil, `previewgate.yaml:7:1: unknown key "bogus"`, ""},
		{"prepare fails", fileWith(9), errors.New("no"), "apply config: no", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, store := setup(t)
			const older = "an older config\n"
			if err := os.WriteFile(path+".bak", []byte(older), 0o600); err != nil {
				t.Fatal(err)
			}
			before := store.Load()
			rec := newRecorder()
			rec.fail = tt.applyErr
			w := newWatcher(WatcherConfig{Path: path, Store: store, Prepare: rec.prepare}, nil, nil, nil)
			defer w.Close()
			_, err := w.Replace([]byte(tt.data))
			got, _ := os.ReadFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %v, want %q", err, tt.wantErr)
				}
				if string(got) != fileWith(10) || store.Load() != before {
					t.Errorf("got file or live config changed, want both untouched")
				}
				if bak, _ := os.ReadFile(path + ".bak"); string(bak) != older {
					t.Errorf("got backup %q after a replace that did not go live, want the one before", bak)
				}
				if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp-*")); len(left) > 0 {
					t.Errorf("staged files left behind: %v", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(got), tt.wantFile) || store.Load().Limits.MaxRunning != 9 {
				t.Errorf("got file %q max_running %d, want the new config", got, store.Load().Limits.MaxRunning)
			}
			if bak, _ := os.ReadFile(path + ".bak"); string(bak) != fileWith(10) {
				t.Errorf("got backup %q, want the previous file", bak)
			}
		})
	}
}

// TestWatcherNamesChangedKeys: a reload's log line names the settings it
// changed, and says which wait for a restart; a secret is named, never
// shown (#16: the line said only "config reloaded").
func TestWatcherNamesChangedKeys(t *testing.T) {
	t.Parallel()
	path, store := setup(t)
	var logs strings.Builder
	w := newWatcher(WatcherConfig{Path: path, Store: store}, slog.New(slog.NewTextHandler(&logs, nil)), nil, nil)
	defer w.Close()
	next := base + "listen: {admin: \"127.0.0.1:9999\"}\nadmin_token: a-brand-new-admin-token\nlimits: {max_running: 7, per_ip: {rate: 5, burst: 10}}\n"
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	got := logs.String()
	for _, want := range []string{
		`msg="config reloaded" config=` + path + ` changed="[admin_token limits.creates_per_subject_per_hour limits.max_running limits.per_ip]"`, // the derived default follows max_running
		`settings=[listen.admin]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "a-brand-new-admin-token") {
		t.Errorf("log shows the secret:\n%s", got)
	}
}

// TestWatcherIgnoresOtherFiles: events on other files of the directory
// never reload, and the first event after start on a rewritten but
// unchanged file is not a reload either (#16: an editor's swap file or a
// .bak next to the config logged "config reloaded").
func TestWatcherIgnoresOtherFiles(t *testing.T) {
	t.Parallel()
	path, store := setup(t)
	synctest.Test(t, func(t *testing.T) {
		events := make(chan fsnotify.Event)
		var logs strings.Builder
		var mu sync.Mutex
		rec := newRecorder()
		w := newWatcher(WatcherConfig{Path: path, Store: store, Prepare: rec.prepare, OnResult: rec.onResult, Debounce: 100 * time.Millisecond},
			slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil)), events, nil)
		defer w.Close()

		// The file as it was loaded, touched: no setting changed.
		events <- fsnotify.Event{Name: path, Op: fsnotify.Write}
		time.Sleep(time.Second)
		synctest.Wait()
		// A change to the config file, but events only on other files.
		if err := os.WriteFile(path, []byte(fileWith(11)), 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(path)
		for _, name := range []string{".previewgate.yaml.swp", "previewgate.yaml~", "other.yaml", "previewgate.yaml.bak"} {
			events <- fsnotify.Event{Name: filepath.Join(dir, name), Op: fsnotify.Create}
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if _, results := rec.snapshot(); len(results) != 0 {
			t.Fatalf("got reloads %v, want none", results)
		}
		mu.Lock()
		if strings.Contains(logs.String(), "reloaded") {
			t.Errorf("got log %q, want no reload line", logs.String())
		}
		mu.Unlock()
		// Kubernetes swaps the ..data symlink of a ConfigMap volume.
		events <- fsnotify.Event{Name: filepath.Join(dir, "..data"), Op: fsnotify.Create}
		time.Sleep(time.Second)
		synctest.Wait()
		if applied, _ := rec.snapshot(); !slices.Equal(applied, []int{11}) {
			t.Errorf("after ..data: got applied %v, want [11]", applied)
		}
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestChanged: settings are named as in the file, templates and env keys
// one by one, lists as a whole.
func TestChanged(t *testing.T) {
	t.Parallel()
	a, err := Parse("a.yaml", []byte(strings.Replace(base, "  web: {image: nginx}\n", "  app: {image: app:1, env: {A: x}}\n  web: {image: web:1}\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.yaml", []byte(strings.Replace(base, "  web: {image: nginx}\n", "  app: {image: app:2, env: {A: y}}\n  api: {image: api:1}\n", 1)+"trusted_proxies: [10.0.0.0/8]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"templates.api", "templates.app.env.A", "templates.app.image", "templates.web", "trusted_proxies"}
	if got := Changed(a, b); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := Changed(a, a); got != nil {
		t.Errorf("same config: got %v, want nil", got)
	}
	// An empty list or map is no list: what GET /admin/config shows as []
	// comes back unchanged (#24, 3).
	d, err := Parse("d.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("c.yaml", []byte(base+"routes: []\ntrusted_proxies: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Auth.AllowedOrigins = []string{}
	c.Templates["web"].Cmd = []string{}
	c.Templates["web"].Env = map[string]string{}
	if got := Changed(d, c); got != nil {
		t.Errorf("empty lists: got %v, want nil", got)
	}
}

// TestWatcherDropsOvertakenReload: a reload whose Prepare is still running
// when a newer replace goes live is dropped, not applied over it (#25: the
// lock is no longer held across Prepare, so their order is kept by turns).
func TestWatcherDropsOvertakenReload(t *testing.T) {
	t.Parallel()
	path, store := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var committed, dropped []int
	prepare := func(c *Config) (func(), func(), error) {
		n := c.Limits.MaxRunning
		if n == 11 {
			close(entered)
			<-release // a slow JWKS fetch
		}
		commit := func() { mu.Lock(); committed = append(committed, n); mu.Unlock() }
		drop := func() { mu.Lock(); dropped = append(dropped, n); mu.Unlock() }
		return commit, drop, nil
	}
	w := newWatcher(WatcherConfig{Path: path, Store: store, Prepare: prepare}, nil, nil, nil)
	defer w.Close()
	if err := os.WriteFile(path, []byte(fileWith(11)), 0o600); err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan error, 1)
	go func() { reloaded <- w.Reload() }()
	<-entered
	if _, err := w.Replace([]byte(fileWith(12))); err != nil {
		t.Fatalf("replace while a reload prepares: %v", err)
	}
	close(release)
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(committed, []int{12}) || !slices.Equal(dropped, []int{11}) {
		t.Errorf("got committed %v dropped %v, want [12] and [11]", committed, dropped)
	}
	if got := store.Load().Limits.MaxRunning; got != 12 {
		t.Errorf("got max_running %d live, want 12 (the replace)", got)
	}
}

// TestReplaceBackupIsTheReplacedFile: two replaces staged from the same
// file and published one after the other leave as .bak the file the
// second one replaced (the first's), not the one both read at staging.
func TestReplaceBackupIsTheReplacedFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "previewgate.yaml")
	if err := os.WriteFile(path, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := stageFile(path, []byte("a\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := stageFile(path, []byte("b\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*staged{a, b} {
		if err := s.publish(); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(path)
	bak, _ := os.ReadFile(path + ".bak")
	if string(got) != "b\n" || string(bak) != "a\n" {
		t.Errorf("got file %q and backup %q, want %q and the file it replaced, %q", got, bak, "b\n", "a\n")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp-*")); len(left) > 0 {
		t.Errorf("staged files left behind: %v", left)
	}
}

// TestWatcherFollowsLinkedFile: a config path that is a symlink to a file
// in another directory (the operator's file kept in a checkout) reloads
// when that file is edited there, in place or by an editor's rename.
func TestWatcherFollowsLinkedFile(t *testing.T) {
	t.Parallel()
	real, store := setup(t)
	path := filepath.Join(t.TempDir(), "previewgate.yaml")
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	w, err := NewWatcher(WatcherConfig{Path: path, Store: store, Prepare: rec.prepare, OnResult: rec.onResult, Debounce: 20 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.WriteFile(real, []byte(fileWith(11)), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := rec.next(t); got != ResultSuccess || store.Load().Limits.MaxRunning != 11 {
		t.Fatalf("in-place edit of the linked file: got %s, max_running %d, want success and 11", got, store.Load().Limits.MaxRunning)
	}
	tmp := filepath.Join(filepath.Dir(real), ".edit.swp")
	if err := os.WriteFile(tmp, []byte(fileWith(12)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, real); err != nil {
		t.Fatal(err)
	}
	if got := rec.next(t); got != ResultSuccess || store.Load().Limits.MaxRunning != 12 {
		t.Fatalf("editor's rename over the linked file: got %s, max_running %d, want success and 12", got, store.Load().Limits.MaxRunning)
	}
}

// newWatcher is a running Watcher on events fed by hand.
func newWatcher(cfg WatcherConfig, log *slog.Logger, events <-chan fsnotify.Event, errs <-chan error) *Watcher {
	w := buildWatcher(cfg, log, events, errs)
	go w.loop()
	return w
}
