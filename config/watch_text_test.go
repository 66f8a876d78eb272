package config

import (
	"log/slog"
	"os"
	"strings"
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
