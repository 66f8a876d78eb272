package gateway

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/records"
)

// heldStore is a records.Store (reads only) whose reads, once held,
// block until released, whatever their context says; it says when a read
// began and counts those that ended.
type heldStore struct {
	records.Store
	mu      sync.Mutex
	held    bool
	ended   int
	began   chan struct{} // a held read began
	release chan struct{}
}

func (s *heldStore) ListRecords(context.Context, map[string]string) (map[string]records.Record, error) {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if held {
		select {
		case s.began <- struct{}{}:
		default:
		}
		<-s.release
		s.mu.Lock()
		s.ended++
		s.mu.Unlock()
	}
	return map[string]records.Record{}, nil
}

// forgedLink is a share link of the right shape, expiring in an hour,
// that no sandbox keeps.
func forgedLink() string {
	return "l0123456789ab." + strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 36) + ".AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
}

// TestForgedLinkHoldsNobody: a made-up share link for a sandbox that
// exists is answered while the re-read of its record it started is still
// blocked in the store (#37, 4: the request waited for the reload, about
// a second a sandbox, which told that the sandbox exists and held the
// request), and the answer is the one a sandbox that does not exist
// gets, byte for byte: status, body and headers, as a page and as JSON.
func TestForgedLinkHoldsNobody(t *testing.T) {
	st := &heldStore{began: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(st.release)
	recs := records.New(st, records.Options{RecheckEvery: time.Hour})
	if _, err := recs.Reload(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	_, srv := startGatewayOpts(t, testConfig(), knownSandboxes{&fakeSandboxes{addrs: []string{"127.0.0.1:1"}}}, Options{Records: recs})
	st.mu.Lock()
	st.held = true
	st.mu.Unlock()

	type answer struct {
		status int
		hdr    http.Header
		body   string
	}
	ask := func(id, accept string) answer {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.Host = "sandbox-" + id + "." + testDomain
		req.Header.Set("Cookie", "previewgate_link="+forgedLink())
		req.Header.Set("Accept", accept)
		done := make(chan answer, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				done <- answer{}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			h := http.Header{}
			for _, k := range []string{"Content-Type", "Content-Length", "Cache-Control", "Retry-After", "Set-Cookie", "Location", "Www-Authenticate", "Vary"} {
				if v, ok := resp.Header[k]; ok {
					h[k] = v
				}
			}
			done <- answer{resp.StatusCode, h, string(b)}
		}()
		select {
		case a := <-done:
			return a
		case <-time.After(10 * time.Second): // a hang guard, not a measure
			t.Fatalf("sandbox %s: the request waits for the store read", id)
			return answer{}
		}
	}

	for _, accept := range []string{"text/html", "application/json"} {
		exists := ask("exists", accept)
		if accept == "text/html" {
			select {
			case <-st.began:
			default:
				t.Fatal("the forged link started no re-read of the existing sandbox's record")
			}
		}
		missing := ask("missing", accept)
		st.mu.Lock()
		if st.ended != 0 {
			t.Fatal("a held store read ended before the answers came")
		}
		st.mu.Unlock()
		if exists.hdr.Get("Retry-After") != "1" {
			t.Errorf("%s: Retry-After %q, want 1 (the link may be a moment old)", accept, exists.hdr.Get("Retry-After"))
		}
		if exists.status != http.StatusUnauthorized || !strings.Contains(exists.body, "link_invalid") {
			t.Errorf("%s: forged link, existing sandbox: %d %.300s, want 401 link_invalid", accept, exists.status, exists.body)
		}
		if exists.status != missing.status || exists.body != missing.body {
			t.Errorf("%s: existing sandbox answered %d %q, missing one %d %q: want the same", accept, exists.status, exists.body, missing.status, missing.body)
		}
		for k := range exists.hdr {
			if strings.Join(exists.hdr[k], ",") != strings.Join(missing.hdr[k], ",") {
				t.Errorf("%s: header %s: existing sandbox %q, missing one %q", accept, k, exists.hdr[k], missing.hdr[k])
			}
		}
		for k := range missing.hdr {
			if _, ok := exists.hdr[k]; !ok {
				t.Errorf("%s: header %s only for a missing sandbox", accept, k)
			}
		}
	}
}
