package admin_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// TestAdminPutRemovedOnAnotherReplica is TestAdminPutRemovedWhileStarting
// across two replicas (two managers on one engine, each behind its own
// admin API): a DELETE through replica A while a PUT through replica B
// creates the sandbox holds: B's PUT answers 404 not_found saying it was
// removed, and nothing of the sandbox is left once both answered. (B's
// PUT answered 200 and the sandbox ran after A's DELETE answered.)
func TestAdminPutRemovedOnAnotherReplica(t *testing.T) {
	var mc sandboxmgr.Config
	e := newDockerEnv(t, func(c *sandboxmgr.Config) { mc = *c })
	e.cfg.AdminToken = testkit.AdminToken
	e.cfg.Templates["app"].Env = map[string]string{"LISTEN_DELAY": "3s"}
	ma, err := mgrtest.New(mgrtest.Config{Config: mc, Runtime: mgrtest.Runtime{Records: e.records}}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ma.Close() })
	if err := ma.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	serve := func(m *mgrtest.Manager) *httptest.Server {
		srv := httptest.NewServer(newAdmin(t, admin.Options{Config: func() *config.Config { return e.cfg },
			Sandboxes: m, Settings: m.Records, Logs: m.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
		t.Cleanup(srv.Close)
		return srv
	}
	srvA, srvB := serve(ma), serve(e.mgr)
	id := dockertest.UniqueID("putrm2")
	removeAtEnd(t, e.mgr, id)

	put := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("PUT", srvB.URL+"/admin/sandboxes/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+testkit.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			put <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		put <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	testkit.WaitFor(t, "the PUT's container", func() bool { return len(dockertest.Containers(t, e.cli, sandboxLabel(id))) > 0 })
	// 200, or 404 if B's container could not be inspected yet (the
	// engine lists a container before its name finds it; A knows no
	// wake of B's): docs/api.md says both.
	if resp, body := adminDo(t, srvA, "DELETE", "/admin/sandboxes/"+id, testkit.AdminToken, nil); resp.StatusCode != 200 && resp.StatusCode != 404 {
		t.Errorf("DELETE on A while a PUT on B creates it: got %d %s, want 200 or 404", resp.StatusCode, body)
	}
	if got := <-put; !strings.HasPrefix(got, "404 ") || !strings.Contains(got, "removed while") {
		t.Errorf("PUT on B whose sandbox a DELETE on A removed: got %s, want 404 saying it was removed while it started", got)
	}
	if cs := dockertest.Containers(t, e.cli, sandboxLabel(id)); len(cs) != 0 {
		t.Errorf("after both answered: %d containers of %s (%s), want none", len(cs), id, cs[0].State)
	}
}
