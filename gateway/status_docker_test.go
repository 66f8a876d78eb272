package gateway

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/pages"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// TestDockerStatusStreamPhasesOnly: the waiting page's status stream
// carries the app's output to a token holder, and only the wake's phases
// to a share link's visitor, over the same wake. A link opens the status
// stream on its own port's host only.
func TestDockerStatusStreamPhasesOnly(t *testing.T) {
	cfg, mc := linkSetup(t)
	cfg.Templates["app"].Env = map[string]string{"LISTEN_DELAY": "3s"}
	var logs syncBuf
	a := startLinkReplica(t, cfg, mc, &logs)
	id := dockertest.UniqueID("status")
	host := "sandbox-" + id + "." + testDomain
	tok := testkit.Mint(t, cfg, id, 10*time.Minute)
	if resp, _ := get(t, a.srv, host, "/", "Authorization", "Bearer "+tok); resp.StatusCode != 200 {
		t.Fatalf("create: got %d, want 200", resp.StatusCode)
	}
	pq, _ := mintLink(t, a.admin.URL, id, `{"ttl":"10m"}`)
	cookie := "previewgate_link=" + pq[strings.Index(pq, "=")+1:]
	pq3001, _ := mintLink(t, a.admin.URL, id, `{"ttl":"10m","port":3001,"path":"/docs"}`)
	cookie3001 := "previewgate_link=" + pq3001[strings.Index(pq3001, "=")+1:]
	if resp, body := get(t, a.srv, host, pages.StatusPath, "Cookie", cookie3001, "Accept", "application/json"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("status stream of the default port with a link for port 3001: got %d %s, want 403", resp.StatusCode, body)
	}
	if st, _ := adminCall(t, a.admin.URL, "POST", "/admin/sandboxes/"+id+"/stop", ""); st != 200 {
		t.Fatalf("stop: got %d", st)
	}

	// A wake, and while the app "compiles" (LISTEN_DELAY), two status
	// streams: the token holder's and the link visitor's.
	woke := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", a.srv.URL+"/", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			woke <- 0
			return
		}
		resp.Body.Close()
		woke <- resp.StatusCode
	}()
	h := a.mgr.Sandbox(id)
	eventually(t, 20*time.Second, "the wake begins", func() bool {
		p := h.Snapshot().Progress.Phase
		return p != "" && p != sandboxmgr.PhaseReady
	})
	type result struct {
		phases []string
		logs   []string
	}
	read := func(hdr ...string) <-chan result {
		out := make(chan result, 1)
		go func() {
			var res result
			defer func() { out <- res }()
			req, _ := http.NewRequest("GET", a.srv.URL+pages.StatusPath, nil)
			req.Host = host
			req.Header.Set("Accept", "text/event-stream")
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Add(hdr[i], hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				var ev pages.Event
				if json.Unmarshal([]byte(line), &ev) == nil {
					res.phases = append(res.phases, ev.Phase)
					res.logs = append(res.logs, ev.Logs...)
				}
			}
		}()
		return out
	}
	byToken, byLink := read("Authorization", "Bearer "+tok), read("Cookie", cookie)
	if st := <-woke; st != 200 {
		t.Fatalf("wake: got %d, want 200", st)
	}
	tr, lr := <-byToken, <-byLink
	t.Logf("token holder: phases %q, logs %q", tr.phases, tr.logs)
	t.Logf("link visitor: phases %q, logs %q", lr.phases, lr.logs)
	if !strings.Contains(strings.Join(tr.logs, "\n"), "compiling for 3s") {
		t.Errorf("the token holder's status stream lacks the app's output: %q", tr.logs)
	}
	if len(lr.logs) != 0 {
		t.Errorf("the link visitor's status stream carried the app's output: %q", lr.logs)
	}
	if len(lr.phases) == 0 || lr.phases[len(lr.phases)-1] != sandboxmgr.PhaseReady {
		t.Errorf("the link visitor's phases %q, want them to end with ready", lr.phases)
	}
}
