package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/internal/app"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// api is the admin API at adminAddr, with the API token.
func api(adminAddr string) *adminapi.Client {
	return &adminapi.Client{BaseURL: "http://" + adminAddr, Token: cliAPIToken}
}

// listBy lists the sandboxes carrying the metadata given, by id.
func listBy(t *testing.T, adminAddr string, metadata map[string]string) map[string]adminapi.Sandbox {
	t.Helper()
	list, err := api(adminAddr).ListSandboxes(t.Context(), metadata)
	if err != nil {
		t.Fatalf("list %v: %v", metadata, err)
	}
	out := map[string]adminapi.Sandbox{}
	for _, s := range list {
		out[s.ID] = s
	}
	return out
}

// TestSandboxTrafficMetadataPause: against a gateway running in the test
// process on the real engine (#23): metadata set at create filters the
// list (also on a restarted gateway that rebuilt everything from the
// runtime), bad metadata is a 400; a concurrent load on three sandboxes is
// counted exactly per sandbox, requests without a valid token are not
// recorded at all, and no query string reaches the log; the list says why
// a sandbox is awake (an open SSE stream vs a recent request); pause and
// resume through the CLI, and a paused sandbox is woken by a request.
func TestSandboxTrafficMetadataPause(t *testing.T) {
	ids := []string{dockertest.UniqueID("tra"), dockertest.UniqueID("trb"), dockertest.UniqueID("trc")}
	scope, dataDir := dockertest.ScopedLabels(), t.TempDir()
	cfgFile, adminAddr, stop := startScopedCLIGateway(t, scope, dataDir, ids...)
	cfg, _, err := app.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	flags := []string{"--admin", adminAddr, "--token", cliAPIToken}
	metas := [][]string{{"user=alice", "team=x"}, {"user=bob"}, {"user=alice"}}
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"sandboxes", "up", id}
			for _, m := range metas[i] {
				args = append(args, "--metadata", m)
			}
			if code, out, errs := cli(append(args, flags...)...); code != 0 {
				t.Errorf("up %s: exit %d %s %s", id, code, out, errs)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if code, _, errs := cli(append([]string{"sandboxes", "up", dockertest.UniqueID("trx"), "--metadata", "User=x y"}, flags...)...); code != 1 || !strings.Contains(errs, "bad metadata") {
		t.Errorf("up with bad metadata: exit %d %q, want 1 and the API's bad metadata message", code, errs)
	}

	// The filter: one pair, two pairs (AND), through the CLI.
	if got := listBy(t, adminAddr, map[string]string{"user": "alice"}); len(got) != 2 || got[ids[0]].ID == "" || got[ids[2]].ID == "" {
		t.Errorf("metadata.user=alice: got %v, want %s and %s", got, ids[0], ids[2])
	}
	if got := listBy(t, adminAddr, map[string]string{"user": "alice", "team": "x"}); len(got) != 1 || got[ids[0]].Metadata["team"] != "x" {
		t.Errorf("user=alice AND team=x: got %v, want only %s", got, ids[0])
	}
	code, out, errs := cli(append([]string{"sandboxes", "ls", "--metadata", "user=bob"}, flags...)...)
	if code != 0 || !strings.Contains(out, ids[1]) || strings.Contains(out, ids[0]) || !strings.Contains(out, "user=bob") || !strings.Contains(out, "METADATA") {
		t.Errorf("ls --metadata user=bob: exit %d\n%s%s", code, out, errs)
	}
	var ae *adminapi.Error
	if _, err := api(adminAddr).ListSandboxes(t.Context(), map[string]string{"Bad Key": "x"}); !errors.As(err, &ae) || ae.Status != 400 {
		t.Errorf("a filter no sandbox could carry: got %d, want 400", code)
	}

	// The load: every sandbox at once, GETs of known sizes and uploads.
	gw := "http://" + cfg.Listen.HTTP
	token := testkit.Mint(t, cfg, "*", time.Hour)
	type sent struct{ requests, in, out int64 }
	want := make([]sent, len(ids))
	var mu sync.Mutex
	for i, id := range ids {
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 10 {
					var req *http.Request
					if k%2 == 0 {
						req, _ = http.NewRequest("GET", fmt.Sprintf("%s/bytes?n=%d&secret=qs-%d", gw, 1000*(i+1)+g*10+k, k), nil)
					} else {
						req, _ = http.NewRequest("POST", gw+"/upload", bytes.NewReader(make([]byte, 500+i*100+k)))
					}
					req.Host = "sandbox-" + id + ".preview.localhost"
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Errorf("%s %s: %d", req.Method, req.URL.Path, resp.StatusCode)
					}
					mu.Lock()
					want[i].requests++
					want[i].in += req.ContentLength
					want[i].out += n
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	// A client without a valid token: refused, and recorded nowhere (it
	// cannot fill the log, nor make up sandboxes to push others out).
	for _, tok := range []string{"", "not-a-token"} {
		for _, id := range []string{ids[0], "made-up-" + ids[0]} {
			req, _ := http.NewRequest("GET", gw+"/bytes", nil)
			req.Host = "sandbox-" + id + ".preview.localhost"
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Errorf("without a valid token: got %d, want 401", resp.StatusCode)
			}
		}
	}
	got := listBy(t, adminAddr, nil)
	for i, id := range ids {
		tr := got[id].Traffic
		if tr == nil || tr.Requests != want[i].requests || tr.BytesIn != want[i].in || tr.BytesOut != want[i].out || tr.Replica == "" {
			t.Errorf("%s traffic: got %+v, want %+v from a named replica", id, tr, want[i])
		}
	}
	reqs, err := api(adminAddr).Requests(t.Context(), ids[0], 5)
	if err != nil || len(reqs.Requests) != 5 || reqs.Replica == "" {
		t.Fatalf("requests?n=5: got %+v, %v", reqs, err)
	}
	for _, q := range reqs.Requests {
		if q.Status != 200 || q.Client != "127.0.0.1" || (q.Path != "/bytes" && q.Path != "/upload") {
			t.Errorf("a recorded request: got %+v", q)
		}
	}
	code, out, _ = cli(append([]string{"sandboxes", "requests", ids[0], "--json"}, flags...)...)
	if code != 0 || strings.Contains(out, "secret") || strings.Contains(out, "qs-") || strings.Contains(out, token) || !strings.Contains(out, `"/bytes"`) {
		t.Errorf("requests --json: exit %d, want the log without any query or token:\n%s", code, out)
	}
	code, out, _ = cli(append([]string{"sandboxes", "requests", ids[1], "--n", "3"}, flags...)...)
	if code != 0 || strings.Count(out, "127.0.0.1") != 3 || !strings.Contains(out, "TIME") {
		t.Errorf("requests --n 3: exit %d\n%s", code, out)
	}

	// Why awake: an open SSE stream on one, only a recent request on another.
	req, _ := http.NewRequest("GET", gw+"/sse", nil)
	req.Host = "sandbox-" + ids[1] + ".preview.localhost"
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	got = listBy(t, adminAddr, nil)
	resp.Body.Close()
	if a := got[ids[1]].Awake; a == nil || a.OpenSockets != 1 || a.Rule != "max_socket_idle" || !strings.Contains(strings.Join(a.Reasons, "|"), "open WebSocket or SSE") ||
		!a.StopsAt.Equal(a.IdleFrom.Add(time.Hour)) {
		t.Errorf("with an open stream: got %+v, want 1 open socket kept up by max_socket_idle (1h)", a)
	}
	if a := got[ids[0]].Awake; a == nil || a.OpenSockets != 0 || a.Rule != "idle_timeout" || !strings.Contains(strings.Join(a.Reasons, "|"), "last request") ||
		!a.StopsAt.Equal(a.LastActivity.Add(15*time.Minute)) || time.Since(a.LastActivity) > time.Minute {
		t.Errorf("after a request: got %+v, want idle_timeout (15m) from the last request", a)
	}

	// Pause (Docker keeps the memory), a request wakes it; pause, resume.
	c := ids[2]
	if code, out, errs := cli(append([]string{"sandboxes", "pause", c}, flags...)...); code != 0 || out != "sandbox "+c+" paused\n" {
		t.Fatalf("pause: exit %d %q %s", code, out, errs)
	}
	if s := listBy(t, adminAddr, nil)[c]; s.State != "paused" || s.Awake != nil {
		t.Errorf("after pause: got %+v, want paused", s)
	}
	req, _ = http.NewRequest("GET", gw+"/echo", nil)
	req.Host = "sandbox-" + c + ".preview.localhost"
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a request to the paused sandbox: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if s := listBy(t, adminAddr, nil)[c]; s.State != "running" || s.Wakes < 2 {
		t.Errorf("after a request: got %+v, want running, woken twice (create, unpause)", s)
	}
	cli(append([]string{"sandboxes", "pause", c}, flags...)...)
	if code, out, errs := cli(append([]string{"sandboxes", "resume", c}, flags...)...); code != 0 || out != "sandbox "+c+" running\n" {
		t.Fatalf("resume: exit %d %q %s", code, out, errs)
	}
	if s := listBy(t, adminAddr, nil)[c]; s.State != "running" {
		t.Errorf("after resume: got %+v, want running", s)
	}
	cli(append([]string{"sandboxes", "stop", c}, flags...)...)
	if code, _, errs := cli(append([]string{"sandboxes", "pause", c}, flags...)...); code != 1 || !strings.Contains(errs, "not running") {
		t.Errorf("pause of a stopped sandbox: exit %d %q, want 1 and not running", code, errs)
	}

	// A restarted gateway rebuilds the metadata from the runtime; it
	// recorded no traffic of its own.
	stop()
	_, admin2, _ := startScopedCLIGateway(t, scope, dataDir)
	got = listBy(t, admin2, map[string]string{"user": "alice"})
	if len(got) != 2 || got[ids[0]].Metadata["team"] != "x" || got[ids[0]].Traffic != nil {
		t.Errorf("restarted gateway, user=alice: got %+v, want %s and %s with their metadata and no traffic here", got, ids[0], ids[2])
	}
}
