package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestDockerGrantsEndWhileRecordsFail: a replica whose runtime keeps
// failing to list the records must not go on granting what another
// replica revoked — a share link, a "public" — from its old copy (it did:
// the copy was kept until a list succeeded, however long). Once the copy
// is three re-checks old it refuses both (503 link_unavailable; a token is
// needed), says so in its log, and when the runtime answers again it
// serves what the records say (the link revoked: 410).
func TestDockerGrantsEndWhileRecordsFail(t *testing.T) {
	cfg, mc := linkSetup(t)
	var logsA, logsB syncBuf
	a := startLinkReplica(t, cfg, mc, &logsA)
	mb := mc
	recsB := &dockertest.FailingRecords{Store: mc.Runtime.Records} // b's reads of the records can fail
	mb.Runtime.Records = recsB
	b := startLinkReplica(t, cfg, mb, &logsB)
	id := dockertest.UniqueID("stale")
	host := "sandbox-" + id + "." + testDomain
	if resp, _ := get(t, a.srv, host, "/", "Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute)); resp.StatusCode != 200 {
		t.Fatalf("create: got %d, want 200", resp.StatusCode)
	}
	eventually(t, 10*time.Second, "replica b knows the sandbox", func() bool { _, ok := b.mgr.Known(id); return ok })
	pq, linkID := mintLink(t, a.admin.URL, id, `{"ttl":"10m","path":"/"}`)
	resp, _, _ := openLink(t, b.srv, host, pq)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("open the link on b: got %d %v, want 303 and a cookie", resp.StatusCode, resp.Cookies())
	}
	cookie := resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	if st, out := adminCall(t, a.admin.URL, "PATCH", "/admin/sandboxes/"+id, `{"public":true}`); st != 200 {
		t.Fatalf("PATCH public: got %d %v", st, out)
	}
	eventually(t, 10*time.Second, "b serves the public sandbox without a token", func() bool {
		resp, _ := get(t, b.srv, host, "/")
		return resp.StatusCode == 200
	})

	recsB.Fail(true)
	if st, out := adminCall(t, a.admin.URL, "DELETE", "/admin/sandboxes/"+id+"/links/"+linkID, ""); st != 200 {
		t.Fatalf("revoke on a: got %d %v", st, out)
	}
	if st, out := adminCall(t, a.admin.URL, "PATCH", "/admin/sandboxes/"+id, `{"public":false}`); st != 200 {
		t.Fatalf("PATCH public false on a: got %d %v", st, out)
	}
	took := eventually(t, 3*mc.RecheckEvery+15*time.Second, "b stops serving without a token", func() bool {
		resp, _ := get(t, b.srv, host, "/")
		return resp.StatusCode == http.StatusUnauthorized
	})
	t.Logf("b refused anonymous requests %v after the withdrawal", took.Round(10*time.Millisecond))
	resp, body := get(t, b.srv, host, "/", "Cookie", cookie, "Accept", "application/json")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "link_unavailable") {
		t.Errorf("the revoked link on b while its records fail: got %d %.200s, want 503 link_unavailable", resp.StatusCode, body)
	}
	// The replica says so at its next re-check (the requests above see
	// the copy's age at once).
	eventually(t, 2*mc.RecheckEvery+15*time.Second, "b's log says why it refuses", func() bool {
		return strings.Contains(logsB.String(), "could not be re-read")
	})

	recsB.Fail(false)
	eventually(t, 3*mc.RecheckEvery+15*time.Second, "b answers the link revoked once it reads the records", func() bool {
		resp, body := get(t, b.srv, host, "/", "Cookie", cookie, "Accept", "application/json")
		return resp.StatusCode == http.StatusGone && strings.Contains(body, "link_revoked")
	})
	if resp, _ := get(t, b.srv, host, "/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous on b after recovery: got %d, want 401 (public withdrawn)", resp.StatusCode)
	}
	eventually(t, 3*mc.RecheckEvery+15*time.Second, "b's log says it recovered", func() bool {
		return strings.Contains(logsB.String(), "re-read from the runtime")
	})
}
