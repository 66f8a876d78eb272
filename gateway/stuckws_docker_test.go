package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// A WebSocket client that never reads while its sandbox pushes 10 MB must
// not wedge anything (#13): the admin stop, the idle reaper (which closes
// the sandbox's sockets first) and a SIGTERM drain each finish within
// seconds, the proxied socket goes away, and the sandbox wakes again.

// stuckSocket opens /ws?flood=10MB on sandbox id through the gateway with a
// tiny receive buffer and never reads past the 101 head. The returned
// conn is closed when the test ends.
func (e *dockerEnv) stuckSocket(id string) net.Conn {
	e.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	host := "sandbox-" + id + "." + testDomain
	fmt.Fprintf(c, "GET /ws?flood=%d HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", 10<<20, host, testkit.Mint(e.t, e.cfg, id, time.Minute))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		e.t.Fatalf("upgrade: %v %v", resp, err)
	}
	// Let the flood fill every buffer between the app and this socket.
	time.Sleep(2 * time.Second)
	if n := e.gw.sockets.Count(); n == 0 {
		e.t.Fatal("no proxied socket registered")
	}
	return c
}

// waitNoSockets fails unless every proxied socket of the gateway ends
// within d.
func (e *dockerEnv) waitNoSockets(d time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for e.gw.sockets.Count() > 0 {
		if time.Now().After(deadline) {
			e.t.Fatalf("%d proxied sockets still open %v after their sandbox stopped", e.gw.sockets.Count(), d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDockerStuckSocketAdminStop(t *testing.T) {
	t.Parallel()
	e := newDockerEnv(t, nil)
	id := dockertest.UniqueID("stuck-admin")
	wantStatus(t, e.get(id, "/"), 200)
	e.stuckSocket(id)
	testkit.Within(t, 20*time.Second, "admin stop", func() {
		if err := e.mgr.Stop(context.Background(), id); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	e.waitNoSockets(10 * time.Second)
	wantStatus(t, e.get(id, "/"), 200)
}

func TestDockerStuckSocketIdleReap(t *testing.T) {
	t.Parallel()
	e := newIdleEnv(t, func(cfg *config.Config) {
		cfg.Templates["app"].MaxSocketIdle = config.Duration(3 * time.Second)
	})
	id := dockertest.UniqueID("stuck-reap")
	wantStatus(t, e.get(id, "/"), 200)
	e.stuckSocket(id)
	// The reaper closes the sockets (BeforeStop) and stops the container
	// after max_socket_idle (3s); its stop must not hang on the socket.
	e.waitState(id, "exited", 20*time.Second)
	e.waitNoSockets(10 * time.Second)
	wantStatus(t, e.get(id, "/"), 200)
}

func TestDockerStuckSocketShutdown(t *testing.T) {
	t.Parallel()
	e := newDockerEnv(t, nil)
	id := dockertest.UniqueID("stuck-term")
	wantStatus(t, e.get(id, "/"), 200)
	e.stuckSocket(id)
	// What serve does on SIGTERM: close sockets while the server drains.
	testkit.Within(t, 15*time.Second, "SIGTERM drain", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		defer cancel()
		go e.gw.Close()
		e.server.Shutdown(ctx)
		e.gw.Close()
	})
	e.waitNoSockets(time.Second)
	e.start() // the next gateway
	wantStatus(t, e.get(id, "/"), 200)
}
