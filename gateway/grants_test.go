package gateway

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/links"
)

// linkRecords keeps one sandbox's links, always fresh.
type linkRecords struct {
	mu sync.Mutex
	ls []links.Link
}

func (r *linkRecords) Links(string) ([]links.Link, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ls, true
}

func (r *linkRecords) RefreshLinks(context.Context, string) {}

// TestGrantSweep: a link's stream stays open while its link holds, ends
// within one sweep of its revoke, and the sweep's goroutine ends when no
// stream is left and is restarted by the next; a token's stream is not
// registered; Close waits for the sweep. Fake time: synctest.
func TestGrantSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		recs := &linkRecords{ls: []links.Link{{ID: "l1", Port: 3000, Path: "/", Expires: time.Now().Add(time.Hour)}}}
		g, err := New(testConfig(), fakes(knownSandboxes{&fakeSandboxes{addrs: []string{"127.0.0.1:1"}}}), Options{Records: recs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		d := &decision{t: g.table.Load(), by: viaShareLink, link: "l1", h: g.sb.Sandbox("exists")}
		d.rt.sandbox = "exists"
		open := func() (context.Context, func()) {
			r, st, release := g.streams.open(httptest.NewRequest("GET", "http://sandbox-exists."+testDomain+"/sse", nil), d)
			if st == nil {
				t.Fatal("a link's stream was not registered")
			}
			return r.Context(), release
		}
		running := func() bool {
			g.streams.mu.Lock()
			defer g.streams.mu.Unlock()
			return g.streams.running
		}

		ctx, release := open()
		time.Sleep(5 * grantSweep)
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatal("the stream ended while its link holds")
		}
		recs.mu.Lock()
		recs.ls = []links.Link{{ID: "l1", Port: 3000, Path: "/", Expires: time.Now().Add(time.Hour), Revoked: time.Now()}}
		recs.mu.Unlock()
		t0 := time.Now()
		<-ctx.Done()
		if took := time.Since(t0); took > grantSweep {
			t.Errorf("ended %v after the revoke, want within one sweep (%v)", took, grantSweep)
		}
		release()
		time.Sleep(grantSweep)
		synctest.Wait()
		if running() {
			t.Error("the sweep runs with no stream registered")
		}

		tok := *d
		tok.by = withToken
		if _, st, release := g.streams.open(httptest.NewRequest("GET", "http://sandbox-exists."+testDomain+"/sse", nil), &tok); st != nil || running() {
			t.Error("a token's stream was registered")
		} else {
			release()
		}
		recs.mu.Lock()
		recs.ls = []links.Link{{ID: "l1", Port: 3000, Path: "/", Expires: time.Now().Add(2500 * time.Millisecond)}}
		recs.mu.Unlock()
		ctx, release = open()
		defer release()
		if !running() {
			t.Error("the sweep did not start again for a new stream")
		}
		t0 = time.Now()
		<-ctx.Done()
		if took := time.Since(t0); took < 2500*time.Millisecond || took > 2500*time.Millisecond+grantSweep {
			t.Errorf("a link expiring in 2.5s: its stream ended after %v", took)
		}
	})
}
