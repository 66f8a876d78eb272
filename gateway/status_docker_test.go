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
// to a share link's visitor, over the same wake, and to an anonymous
// visitor of a public sandbox. A link opens the status stream on its own
// port's host only.
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
	h := a.mgr.Sandbox(id)
	// wake stops the sandbox, wakes it with a token and, while the app
	// "compiles" (LISTEN_DELAY), reads a status stream for each of hdrs
	// (name, value pairs) until ready.
	wake := func(hdrs ...[]string) []statusSeen {
		t.Helper()
		if st, _ := adminCall(t, a.admin.URL, "POST", "/admin/sandboxes/"+id+"/stop", ""); st != 200 {
			t.Fatalf("stop: got %d", st)
		}
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
		eventually(t, 20*time.Second, "the wake begins", func() bool {
			p := h.Snapshot().Progress.Phase
			return p != "" && p != sandboxmgr.PhaseReady
		})
		var outs []<-chan statusSeen
		for _, hdr := range hdrs {
			outs = append(outs, readStatus(a.srv.URL, host, hdr...))
		}
		if st := <-woke; st != 200 {
			t.Fatalf("wake: got %d, want 200", st)
		}
		var seen []statusSeen
		for _, o := range outs {
			seen = append(seen, <-o)
		}
		return seen
	}
	check := func(who string, s statusSeen, output bool) {
		t.Helper()
		t.Logf("%s: phases %q, logs %q", who, s.phases, s.logs)
		switch {
		case len(s.phases) == 0 || s.phases[len(s.phases)-1] != sandboxmgr.PhaseReady:
			t.Errorf("%s: phases %q, want them to end with ready", who, s.phases)
		case output && !strings.Contains(strings.Join(s.logs, "\n"), "compiling for 3s"):
			t.Errorf("%s: the status stream lacks the app's output: %q", who, s.logs)
		case !output && len(s.logs) != 0:
			t.Errorf("%s: the status stream carried the app's output: %q", who, s.logs)
		}
	}

	seen := wake([]string{"Authorization", "Bearer " + tok}, []string{"Cookie", cookie})
	check("token holder", seen[0], true)
	check("link visitor", seen[1], false)

	// Public: an anonymous visitor sees phases only; a token sent there
	// (not needed) still shows the output.
	if st, out := adminCall(t, a.admin.URL, "PATCH", "/admin/sandboxes/"+id, `{"public":true}`); st != 200 {
		t.Fatalf("PATCH public: got %d %v", st, out)
	}
	seen = wake([]string{"Authorization", "Bearer " + tok}, nil)
	check("token holder on the public sandbox", seen[0], true)
	check("anonymous visitor of the public sandbox", seen[1], false)
}

// statusSeen is what one status stream carried.
type statusSeen struct {
	phases []string
	logs   []string
}

// readStatus reads host's status stream through base with hdr until it
// ends, on a goroutine.
func readStatus(base, host string, hdr ...string) <-chan statusSeen {
	out := make(chan statusSeen, 1)
	go func() {
		var res statusSeen
		defer func() { out <- res }()
		req, _ := http.NewRequest("GET", base+pages.StatusPath, nil)
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
