package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestDockerParallelFirstRequestsCapped: one token subject sends six first
// requests for six new sandboxes at once. Each cap on running or creating
// sandboxes holds exactly on one gateway: the starts in flight count
// against it, so two sandboxes run and the other four requests get the
// cap's documented answer, their sandboxes never made.
func TestDockerParallelFirstRequestsCapped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		edit   func(*config.Config)
		status int
		code   string
	}{
		{"max_running_per_subject", func(c *config.Config) { c.Limits.MaxRunningPerSubject = 2 },
			http.StatusTooManyRequests, "subject_running_limit"},
		{"max_running", func(c *config.Config) {
			c.Limits.MaxRunning = 2
			c.Limits.CreatesPerSubjectPerHour = -1
		}, http.StatusServiceUnavailable, "busy"},
		{"max_running with a warm pool", func(c *config.Config) {
			c.Limits.MaxRunning = 2
			c.Limits.CreatesPerSubjectPerHour = -1
			c.Templates["app"].Pool = 4 // claims count like starts
		}, http.StatusServiceUnavailable, "busy"},
		{"creates_per_subject_per_hour", func(c *config.Config) { c.Limits.CreatesPerSubjectPerHour = 2 },
			http.StatusTooManyRequests, "create_quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newDockerEnv(t, tc.edit)
			if pool := e.cfg.Templates["app"].Pool; pool > 0 {
				for deadline := time.Now().Add(60 * time.Second); e.mgr.Manager.PoolSize("app") < pool; {
					if time.Now().After(deadline) {
						t.Fatalf("got a pool of %d after 60s, want %d", e.mgr.Manager.PoolSize("app"), pool)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			const n, capped = 6, 2
			ids := make([]string, n)
			for i := range ids {
				ids[i] = dockertest.UniqueID(fmt.Sprintf("cap%d", i))
			}
			got := e.fanOutCodes(ids)
			if len(got[200]) != capped || len(got[tc.status]) != n-capped {
				t.Fatalf("got %v, want %d answered 200 and %d %d %s", got, capped, n-capped, tc.status, tc.code)
			}
			// By name: a claimed pool container keeps its pool labels.
			byName := make(map[string]string)
			for _, c := range dockertest.Containers(t, e.cli, dockertest.LabelCase+"="+e.labels[dockertest.LabelCase]) {
				byName[strings.TrimPrefix(c.Names[0], "/")] = c.State
			}
			for _, c := range got[tc.status] {
				if c.code != tc.code {
					t.Errorf("%s: got code %q, want %q", c.id, c.code, tc.code)
				}
				if st, ok := byName[mgrtest.Name(e.labels, c.id)]; ok {
					t.Errorf("%s: got a container (%s) for a refused request, want none", c.id, st)
				}
			}
			running := 0
			for _, id := range ids {
				if byName[mgrtest.Name(e.labels, id)] == "running" {
					running++
				}
			}
			if running != capped {
				t.Errorf("got %d sandboxes running, want %d", running, capped)
			}
		})
	}
}

// capAnswer is one request's status and error code, for fanOutCodes.
type capAnswer struct {
	id, code string
}

// fanOutCodes sends one JSON GET per id at once, all with tokens of the
// same subject, and returns the answers by status.
func (e *dockerEnv) fanOutCodes(ids []string) map[int][]capAnswer {
	client := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: len(ids)}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	out := make(map[int][]capAnswer)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, id := range ids {
		tok := testkit.Mint(e.t, e.cfg, id, time.Minute)
		wg.Go(func() {
			req, _ := http.NewRequest("GET", e.srv.URL+"/", nil)
			req.Host = "sandbox-" + id + "." + testDomain
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Accept", "application/json")
			<-start
			status, a := -1, capAnswer{id: id}
			if resp, err := client.Do(req); err != nil {
				a.code = err.Error()
			} else {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
				var j struct{ Code string }
				if json.Unmarshal(body, &j) == nil {
					a.code = j.Code
				}
			}
			mu.Lock()
			out[status] = append(out[status], a)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return out
}
