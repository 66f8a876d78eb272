package admin_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// What a backend meets on the sandbox API of a real engine (#23, the
// platform developer's walk): each answer tells the caller what to do.

// removeAtEnd removes sandboxes ids through mgr when t ends, passed or not.
func removeAtEnd(t *testing.T, mgr *sandboxmgr.Manager, ids ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range ids {
			mgr.Remove(ctx, id)
		}
	})
}

// At capacity, PUT answers what a preview answers: 503 busy with
// Retry-After, not "unavailable" (the runtime does not answer) without
// one, which a backend cannot tell from an engine that is down.
func TestAdminPutAtCapacity(t *testing.T) {
	e := newDockerEnv(t, func(c *sandboxmgr.Config) { c.MaxRunning = 1 })
	e.cfg.AdminToken = testkit.AdminToken
	srv := httptest.NewServer(admin.New(admin.Options{Config: func() *config.Config { return e.cfg },
		Sandboxes: e.mgr, Log: testkit.Logger(t)}))
	defer srv.Close()
	first, second := dockertest.UniqueID("cap"), dockertest.UniqueID("cap")
	removeAtEnd(t, e.mgr, first, second)

	if resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+first, testkit.AdminToken, nil); resp.StatusCode != 200 {
		t.Fatalf("PUT %s: got %d %s, want 200", first, resp.StatusCode, body)
	}
	resp, body := adminDo(t, srv, "PUT", "/admin/sandboxes/"+second, testkit.AdminToken, nil)
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"code":"busy"`) || resp.Header.Get("Retry-After") == "" {
		t.Errorf("PUT over max_running: got %d Retry-After %q %s, want 503 busy with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if n := len(dockertest.Containers(t, e.cli, sandboxLabel(second))); n != 0 {
		t.Errorf("a PUT refused at capacity made %d containers", n)
	}
}
