package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestDockerStaleEndpointEventsDown: while the gateway's Docker events
// stream is down, sandbox A's container dies unseen and sandbox B's is
// created on A's address (a network with room for one container). A's
// next request must not reach B's app (#13: nothing a sandbox sends
// reaches another sandbox's user). Without an event to drop A's cached
// endpoint, only a check with the engine before using it can tell.
func TestDockerStaleEndpointEventsDown(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	proxy := newEventsProxy(t)
	name := dockertest.Network(t)
	createTinyNetwork(t, name)
	cfg := testConfig()
	cfg.Docker.Host = proxy.host
	cfg.Templates["app"].Image = dockertest.TestAppImage(t)
	cfg.Templates["app"].Ready = config.Ready{Path: "/", Timeout: config.Duration(20 * time.Second)}
	e := &dockerEnv{t: t, cli: cli, cfg: cfg, network: name}
	e.start()
	a, b := dockertest.UniqueID("a"), dockertest.UniqueID("b")
	f := e.fronts()[0]
	code, cookies, body := e.do(f, "GET", a, "/echo?user=x")
	wantEcho(t, "A's user", code, cookies, body, a, "user=x")
	ipA := e.ip(a)

	// Each reconnect attempt resyncs by listing, which would notice A's
	// end; after the 7th refused one the next is 12.8 s away, time enough
	// for what follows to happen between two attempts.
	proxy.Cut()
	testkit.WaitFor(t, "seven refused events reconnects", func() bool { return proxy.Refused() >= 7 })
	// A running sandbox still serves a browser's navigation while the
	// stream is down (it once got the waiting page, which reloaded into
	// the waiting page again).
	nav, err := http.NewRequest("GET", f.url+"/echo?user=nav", nil)
	if err != nil {
		t.Fatal(err)
	}
	nav.Host = "sandbox-" + a + "." + testDomain
	nav.Header.Set("Authorization", "Bearer "+testkit.Mint(t, cfg, a, time.Minute))
	nav.Header.Set("Sec-Fetch-Mode", "navigate")
	resp, err := f.client.Do(nav)
	if err != nil {
		t.Fatal(err)
	}
	navBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantEcho(t, "A's navigation, stream down", resp.StatusCode, nil, string(navBody), a, "user=nav")
	if err := cli.ContainerKill(context.Background(), mgrtest.ContainerOf(context.Background(), dockertest.Client(t), a), "KILL"); err != nil {
		t.Fatal(err)
	}
	e.waitState(a, "exited", 20*time.Second)
	code, cookies, body = e.do(f, "GET", b, "/echo?user=y")
	wantEcho(t, "B's user", code, cookies, body, b, "user=y")
	if ipB := e.ip(b); ipB != ipA {
		t.Fatalf("B got address %s, A had %s: the network should have had room for one", ipB, ipA)
	}

	// A POST: ReverseProxy's transport for A's instance has no pooled
	// connection, so it dials A's address afresh. (The GET's pooled
	// connection fails on first use and makes the gateway ask Docker.)
	code, _, body = e.do(f, "POST", a, "/echo?user=x2")
	var echo struct{ Hostname string }
	if code == 200 && json.Unmarshal([]byte(body), &echo) == nil && echo.Hostname != "" && strings.HasPrefix(e.containerID(b), echo.Hostname) {
		t.Fatalf("A's user got B's app's answer: %d %s", code, body)
	}
	t.Logf("A's user, A dead and B on its address: %d %.120s", code, body)
}

// containerID is the full ID of sandbox id's container.
func (e *dockerEnv) containerID(id string) string {
	e.t.Helper()
	c, err := e.cli.ContainerInspect(context.Background(), mgrtest.ContainerOf(context.Background(), e.cli, id))
	if err != nil {
		e.t.Fatal(err)
	}
	return c.ID
}
