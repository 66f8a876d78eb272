package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// Open streams end with the grant that let them in (grants.go), on the
// real engine with two replicas that share only their records: a
// WebSocket or an SSE stream opened with a share link's cookie ends when
// the link is revoked (on either replica) or expires, or the sandbox is
// removed; one opened without a token on a public sandbox ends when it is
// made private again; one opened with a token stays.

func TestDockerStreamsEndWithGrant(t *testing.T) {
	cfg, mc := linkSetup(t)
	streamsEndWithGrant(t, cfg, mc)
}

// openWS opens a WebSocket to /ws on host through r with headers hdr
// (name, value pairs) and the preview's own Origin, and reads one message.
func openWS(t *testing.T, r *linkReplica, host string, hdr ...string) *websocket.Conn {
	t.Helper()
	h := http.Header{"Origin": {"http://" + host}}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Add(hdr[i], hdr[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.srv.URL, "http")+"/ws",
		&websocket.DialOptions{Host: host, HTTPHeader: h})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("WebSocket %v: %d %v", hdr, status, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatalf("first message: %v", err)
	}
	return c
}

// wantClosed reads c (the app pushes a tick every 100ms) until it ends,
// within the bound: it must end with a close frame of code and, if
// reason is not "", that reason. It returns how long that took.
func wantClosed(t *testing.T, what string, c *websocket.Conn, within time.Duration, code websocket.StatusCode, reason string) time.Duration {
	t.Helper()
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		took := time.Since(t0)
		var ce websocket.CloseError
		switch {
		case ctx.Err() != nil:
			t.Errorf("%s: still open after %v", what, within)
		case !errors.As(err, &ce):
			t.Errorf("%s: ended after %v without a close frame: %v", what, took, err)
		case ce.Code != code || reason != "" && ce.Reason != reason:
			t.Errorf("%s: closed with %d %q, want %d %q", what, ce.Code, ce.Reason, code, reason)
		default:
			t.Logf("%s: closed with %d %q after %v", what, ce.Code, ce.Reason, took.Round(time.Millisecond))
		}
		return took
	}
}

// wantOpen checks that c still echoes.
func wantOpen(t *testing.T, what string, c *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte("still-here")); err != nil {
		t.Errorf("%s: write: %v", what, err)
		return
	}
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			t.Errorf("%s: closed: %v", what, err)
			return
		}
		if string(msg) == "still-here" {
			return
		}
	}
}

// sseStream is an SSE response of the test app (an event every 100ms).
type sseStream struct {
	done chan struct{}
	mu   sync.Mutex
	n    int   // events read
	err  error // how it ended
}

// openSSE asks host's /sse for a minute of events through r with hdr
// (Accept: text/event-stream unless hdr sets another), and reads them on
// a goroutine until the stream ends.
func openSSE(t *testing.T, r *linkReplica, host string, hdr ...string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", r.srv.URL+"/sse?n=600", nil)
	req.Host = host
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("SSE: got %d, want 200", resp.StatusCode)
	}
	s := &sseStream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				s.mu.Lock()
				s.n++
				s.mu.Unlock()
			}
		}
		s.mu.Lock()
		s.err = sc.Err()
		s.mu.Unlock()
	}()
	return s
}

// wantEnded waits for s to end within the bound, before its minute.
func (s *sseStream) wantEnded(t *testing.T, what string, within time.Duration) {
	t.Helper()
	select {
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Logf("%s: ended after %d events (%v)", what, s.n, s.err)
		if s.n >= 600 {
			t.Errorf("%s: ran to its end", what)
		}
	case <-time.After(within):
		t.Errorf("%s: still open after %v", what, within)
	}
}

func streamsEndWithGrant(t *testing.T, cfg *config.Config, mc mgrtest.Config) {
	var logs syncBuf
	a, b := startLinkReplica(t, cfg, mc, &logs), startLinkReplica(t, cfg, mc, &logs)
	id := dockertest.UniqueID("grant")
	host := "sandbox-" + id + "." + testDomain
	tok := testkit.Mint(t, cfg, id, 10*time.Minute)
	if resp, _ := get(t, a.srv, host, "/", "Authorization", "Bearer "+tok); resp.StatusCode != 200 {
		t.Fatalf("create: got %d, want 200", resp.StatusCode)
	}
	eventually(t, 10*time.Second, "replica b knows the sandbox", func() bool { _, ok := b.mgr.Known(id); return ok })
	// Here: this replica's sweep. There: the other's re-check (its list
	// call included), then its sweep.
	here := grantSweep + 2*time.Second
	there := mc.RecheckEvery + grantSweep + 3*time.Second
	cookieOf := func(pq string) string { return "previewgate_link=" + pq[strings.Index(pq, "=")+1:] }
	// openedOnB: the page the app's streams come from is opened on b
	// first, as a browser does (b reads the new link meanwhile).
	openedOnB := func(t *testing.T, pq string) {
		t.Helper()
		if resp, _, _ := openLink(t, b.srv, host, pq); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("open the link on b: got %d, want 303", resp.StatusCode)
		}
	}
	withToken := openWS(t, b, host, "Authorization", "Bearer "+tok)

	t.Run("revoke", func(t *testing.T) {
		pq, lid := mintLink(t, a.admin.URL, id, `{"ttl":"10m"}`)
		cookie := cookieOf(pq)
		openedOnB(t, pq)
		onA, onB := openWS(t, a, host, "Cookie", cookie), openWS(t, b, host, "Cookie", cookie)
		sse := openSSE(t, b, host, "Cookie", cookie)
		// The client decides what it calls a stream: one that does not
		// say so ends with its link too.
		bare := openSSE(t, b, host, "Cookie", cookie, "Accept", "*/*")
		// A stream whose app has not answered yet when the link is
		// revoked gets the answer a new request would.
		before := make(chan string, 1)
		go func() {
			resp, body := get(t, a.srv, host, "/slow?d=60s", "Cookie", cookie, "Accept", "text/event-stream")
			before <- fmt.Sprint(resp.StatusCode, " ", body)
		}()
		eventually(t, 10*time.Second, "the slow stream registered", func() bool { return a.gw.streams.count() == 2 })
		if st, out := adminCall(t, a.admin.URL, "DELETE", "/admin/sandboxes/"+id+"/links/"+lid, ""); st != 200 {
			t.Fatalf("revoke: got %d %v", st, out)
		}
		select {
		case got := <-before:
			if !strings.HasPrefix(got, "410 ") || !strings.Contains(got, "revoked") {
				t.Errorf("a stream not yet answered at the revoke: got %s, want 410 link_revoked", got)
			}
		case <-time.After(here):
			t.Errorf("a stream not yet answered at the revoke: still waiting after %v", here)
		}
		wantClosed(t, "link WebSocket on the replica that revoked", onA, here, CloseGrantEnded, reasonRevoked)
		wantClosed(t, "link WebSocket on the other replica", onB, there, CloseGrantEnded, reasonRevoked)
		sse.wantEnded(t, "link SSE on the other replica", there)
		bare.wantEnded(t, "link SSE asked for without Accept: text/event-stream", there)
		wantOpen(t, "token WebSocket", withToken)
	})

	t.Run("expire", func(t *testing.T) {
		pq, _ := mintLink(t, a.admin.URL, id, `{"ttl":"4s"}`)
		t0 := time.Now()
		openedOnB(t, pq)
		c := openWS(t, b, host, "Cookie", cookieOf(pq))
		wantClosed(t, "link WebSocket at the link's expiry", c, 4*time.Second+here, CloseGrantEnded, reasonExpired)
		if took := time.Since(t0); took < 3*time.Second {
			t.Errorf("closed %v after the mint, before the link's 4s", took)
		}
	})

	t.Run("public to private", func(t *testing.T) {
		if st, out := adminCall(t, a.admin.URL, "PATCH", "/admin/sandboxes/"+id, `{"public":true}`); st != 200 {
			t.Fatalf("PATCH public: got %d %v", st, out)
		}
		eventually(t, there, "public seen by replica b", func() bool {
			resp, _ := get(t, b.srv, host, "/")
			return resp.StatusCode == 200
		})
		anonA, anonB := openWS(t, a, host), openWS(t, b, host)
		tokenB := openWS(t, b, host, "Authorization", "Bearer "+tok)
		sse := openSSE(t, b, host)
		if st, out := adminCall(t, a.admin.URL, "PATCH", "/admin/sandboxes/"+id, `{"public":false}`); st != 200 {
			t.Fatalf("PATCH private: got %d %v", st, out)
		}
		wantClosed(t, "public WebSocket on the replica that made it private", anonA, here, CloseGrantEnded, reasonPrivate)
		wantClosed(t, "public WebSocket on the other replica", anonB, there, CloseGrantEnded, reasonPrivate)
		sse.wantEnded(t, "public SSE on the other replica", there)
		wantOpen(t, "token WebSocket opened on the public sandbox", tokenB)
	})

	t.Run("remove", func(t *testing.T) {
		pq, _ := mintLink(t, a.admin.URL, id, `{"ttl":"10m"}`)
		cookie := cookieOf(pq)
		openedOnB(t, pq)
		onA, onB := openWS(t, a, host, "Cookie", cookie), openWS(t, b, host, "Cookie", cookie)
		if st, _ := adminCall(t, a.admin.URL, "DELETE", "/admin/sandboxes/"+id, ""); st != 200 {
			t.Fatalf("remove sandbox: got %d", st)
		}
		// The replica that removes it closes every socket with 1001
		// (going away) before the container goes.
		wantClosed(t, "link WebSocket on the replica that removed", onA, here, websocket.StatusGoingAway, "")
		ctx, cancel := context.WithTimeout(context.Background(), there)
		defer cancel()
		for {
			if _, _, err := onB.Read(ctx); err != nil {
				if ctx.Err() != nil {
					t.Errorf("link WebSocket on the other replica: still open after %v", there)
				}
				t.Logf("link WebSocket on the other replica: %v", err)
				break
			}
		}
	})
}
