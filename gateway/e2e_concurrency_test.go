package gateway

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

func TestDockerConcurrentColdRequests(t *testing.T) {
	e := newDockerEnv(t, nil)
	id := dockertest.UniqueID("herd")
	const n = 200
	ids := make([]string, n)
	for i := range ids {
		ids[i] = id
	}
	count := e.fanOut(ids, 0)
	if count[200] != n {
		t.Fatalf("got statuses %v, want all %d = 200", count, n)
	}
	e.onlyContainer(id)
}

// TestDockerStartCap: 20 distinct cold sandboxes at once with a start cap
// of 4: never more than 4 starts in flight, and every request completes or
// gets 503 within its bound. Five times the cap proves the bound as 50
// sandboxes did, with 30 fewer containers to create and remove.
func TestDockerStartCap(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) {
		c.Limits.MaxConcurrentStarts = 4
		c.Limits.MaxRunning = 100
		c.Limits.CreatesPerSubjectPerHour = -1 // one test subject makes them all
	})
	const n = 20
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("cap%d-%s", i, dockertest.RunID())
	}
	// The client timeout is the bound: a hang fails the request.
	count := e.fanOut(ids, 90*time.Second)
	if count[200]+count[503] != n {
		t.Fatalf("got statuses %v, want every request 200 or 503", count)
	}
	inFlight, peak := e.mgr.Manager.StartStats()
	if peak > 4 || peak < 1 || inFlight != 0 {
		t.Fatalf("got peak %d starts in flight (%d now), want at most 4 (0 now)", peak, inFlight)
	}
	t.Logf("statuses %v, peak starts in flight %d", count, peak)
}

// fanOut sends one GET per entry of ids at once (an id may repeat) and
// counts the statuses; -1 counts transport errors. timeout 0 means none.
func (e *dockerEnv) fanOut(ids []string, timeout time.Duration) map[int]int {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: len(ids)}}
	defer client.CloseIdleConnections()
	statuses := make(chan int, len(ids))
	var wg sync.WaitGroup
	for _, id := range ids {
		tok := testkit.Mint(e.t, e.cfg, id, time.Minute)
		wg.Go(func() {
			req, _ := http.NewRequest("GET", e.srv.URL+"/", nil)
			req.Host = "sandbox-" + id + "." + testDomain
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil {
				e.t.Errorf("%s: %v", id, err)
				statuses <- -1
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	return count
}
