package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/pages"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// Issue 7, done-means 1, through the real gateway and real Docker: with
// idle_timeout 2s a sandbox stops shortly after its last request, but not
// while a WebSocket to it stays open, until max_socket_idle, when the socket
// gets a 1001 close; the next navigation wakes it, a WebSocket reconnect
// does not.

const (
	idleTimeout   = 2 * time.Second
	maxSocketIdle = 6 * time.Second
)

// newIdleEnv is newDockerEnv with the manager's reaper able to see the
// templates (Config.Templates), idle_timeout 2s and max_socket_idle 6s.
// The reaper runs at its default, every second. The manager is scoped to
// this test's containers (an extra label), so a parallel test's reaper
// never adopts and stops them.
func newIdleEnv(t *testing.T, edit func(*config.Config)) *dockerEnv {
	t.Helper()
	return newDockerEnv(t, func(cfg *config.Config) {
		cfg.Templates["app"].IdleTimeout = config.Duration(idleTimeout)
		cfg.Templates["app"].MaxSocketIdle = config.Duration(maxSocketIdle)
		if edit != nil {
			edit(cfg)
		}
	})
}

// state is the Docker state of sandbox id's container ("running", "exited"...).
func (e *dockerEnv) state(id string) string {
	e.t.Helper()
	c, err := e.cli.ContainerInspect(context.Background(), mgrtest.ContainerOf(context.Background(), e.cli, id))
	if err != nil {
		e.t.Fatalf("inspect %s: %v", id, err)
	}
	return c.State.Status
}

// waitState polls Docker until id's container is in state want, failing
// after within.
func (e *dockerEnv) waitState(id, want string, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := e.state(id)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("container of %s is %q after %v, want %q", id, got, within, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dialWS opens a WebSocket to /ws on sandbox id through the gateway, as a
// browser's HMR client would (fetch metadata, same Origin), authenticated
// with a bearer token.
func (e *dockerEnv) dialWS(ctx context.Context, id string) (*websocket.Conn, *http.Response, error) {
	host := "sandbox-" + id + "." + testDomain
	hdr := http.Header{
		"Authorization":  {"Bearer " + testkit.Mint(e.t, e.cfg, id, time.Minute)},
		"Origin":         {"http://" + host},
		"Sec-Fetch-Mode": {"websocket"},
		"Sec-Fetch-Site": {"same-origin"},
		"Sec-Fetch-Dest": {"empty"},
	}
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.srv.URL, "http")+"/ws",
		&websocket.DialOptions{Host: host, HTTPHeader: hdr})
}

// navigate is a browser's top-level navigation to / on sandbox id.
func (e *dockerEnv) navigate(id string) *http.Response {
	e.t.Helper()
	return testkit.Request(e.t, e.srv, "GET", "sandbox-"+id+"."+testDomain, "/", testkit.Mint(e.t, e.cfg, id, time.Minute),
		"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Sec-Fetch-Site", "none",
		"Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
}

// wantAsleepReconnect checks that a browser's WebSocket reconnect to the
// stopped sandbox id gets 503 with Retry-After and does not start it.
func (e *dockerEnv) wantAsleepReconnect(ctx context.Context, id string) {
	e.t.Helper()
	c, resp, err := e.dialWS(ctx, id)
	if err == nil {
		c.CloseNow()
		e.t.Fatal("WebSocket reconnect to a stopped sandbox succeeded, want 503")
	}
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		status, retry := 0, ""
		if resp != nil {
			status, retry = resp.StatusCode, resp.Header.Get("Retry-After")
		}
		e.t.Fatalf("WebSocket reconnect: got %d Retry-After %q (%v), want 503 with Retry-After", status, retry, err)
	}
	// A wake, had one started, would have the container running within a
	// second or two (it was stopped, not removed).
	time.Sleep(2 * time.Second)
	if got := e.state(id); got != "exited" {
		e.t.Fatalf("after a WebSocket reconnect the container is %q, want it still exited", got)
	}
}

// wantWokenByNavigation checks that a navigation to the stopped sandbox id
// gets the waiting page and wakes the same container.
func (e *dockerEnv) wantWokenByNavigation(id, containerID string) {
	e.t.Helper()
	resp := e.navigate(id)
	body := wantStatus(e.t, resp, http.StatusOK)
	if !strings.Contains(string(body), pages.StatusPath) {
		e.t.Fatalf("navigation to a stopped sandbox: got %.200q, want the waiting page", body)
	}
	e.waitState(id, "running", 15*time.Second)
	if body := wantStatus(e.t, e.get(id, "/after"), 200); !strings.Contains(string(body), `"path":"/after"`) {
		e.t.Fatalf("got %s, want the app's echo", body)
	}
	if got := e.onlyContainer(id).ID; got != containerID {
		e.t.Fatalf("woken sandbox runs container %s, want the stopped one %s", got, containerID)
	}
}

// TestDockerIdleStopsAfterLastRequest: the sandbox stops shortly after its
// last request; a WebSocket reconnect does not wake it, a navigation does.
func TestDockerIdleStopsAfterLastRequest(t *testing.T) {
	t.Parallel()
	e := newIdleEnv(t, nil)
	id := dockertest.UniqueID("idle")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	wantStatus(t, e.get(id, "/"), 200)
	cid := e.onlyContainer(id).ID
	// idle_timeout 2s + a reaper tick (1s) + the stop itself; 15s is the bound.
	e.waitState(id, "exited", 15*time.Second)
	if _, ok := e.mgr.Manager.Cached(id); ok {
		t.Fatal("stopped sandbox still cached as running")
	}
	e.wantAsleepReconnect(ctx, id)
	e.wantWokenByNavigation(id, cid)
}

// TestDockerIdleSocketUntilMaxSocketIdle: an open WebSocket keeps the
// sandbox running past idle_timeout; after max_socket_idle without an HTTP
// request it is stopped anyway and the socket gets 1001 (going away). The
// browser's reconnect then gets 503 and leaves it stopped.
func TestDockerIdleSocketUntilMaxSocketIdle(t *testing.T) {
	t.Parallel()
	e := newIdleEnv(t, nil)
	id := dockertest.UniqueID("sockidle")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	wantStatus(t, e.get(id, "/"), 200)
	cid := e.onlyContainer(id).ID
	c, _, err := e.dialWS(ctx, id)
	if err != nil {
		t.Fatalf("websocket dial through gateway: %v", err)
	}
	defer c.CloseNow()
	opened := time.Now()
	// Read the app's ticks until the socket ends.
	ended := make(chan error, 1)
	ticks := 0
	go func() {
		for {
			if _, _, err := c.Read(ctx); err != nil {
				ended <- err
				return
			}
			ticks++
		}
	}()

	// Past idle_timeout plus two reaper ticks, with the socket open: running.
	time.Sleep(idleTimeout + 2500*time.Millisecond)
	if got := e.state(id); got != "running" {
		t.Fatalf("with a WebSocket open %v after the last request, the container is %q, want running",
			time.Since(opened).Round(time.Millisecond), got)
	}
	select {
	case err := <-ended:
		t.Fatalf("socket ended before max_socket_idle: %v", err)
	default:
	}

	// After max_socket_idle (6s) the reaper closes the socket and stops it.
	var readErr error
	select {
	case readErr = <-ended:
	case <-ctx.Done():
		t.Fatal("socket still open 30s in, want it closed after max_socket_idle")
	}
	if got := websocket.CloseStatus(readErr); got != websocket.StatusGoingAway {
		t.Fatalf("socket ended with %v (close status %d), want 1001 going away", readErr, got)
	}
	if ticks == 0 {
		t.Fatal("no message from the app before the close; the socket never worked")
	}
	t.Logf("socket closed with 1001 %v after it opened (%d ticks)", time.Since(opened).Round(time.Millisecond), ticks)
	e.waitState(id, "exited", 15*time.Second)
	e.wantAsleepReconnect(ctx, id)
	e.wantWokenByNavigation(id, cid)
}
