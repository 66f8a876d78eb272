package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestDockerStalledEventsDialConfirmed (#37, 1): the attack that reached
// another container through a dial already decided. Docker's events stream
// stalls, sandbox A's container is stopped behind the gateway's back
// (docker stop -t 0) and a container no gateway made (a hostile app)
// starts on the same network with A's old address, pinned. The manager
// still caches A's endpoint (no event, re-check off, and no wake of its
// own claimed the address), so A's next request dials the hostile app. The
// connection must not carry it: the runtime, read after the dial, says A's
// instance no longer runs there. No answer, on any front end or a
// WebSocket, may come from the hostile container.
func TestDockerStalledEventsDialConfirmed(t *testing.T) {
	t.Parallel()
	e, proxy := stallEnv(t, -1)
	a := dockertest.UniqueID("a")
	fronts := e.fronts()
	code, cookies, body := e.do(fronts[0], "GET", a, "/echo?user=x")
	wantEcho(t, "A's user", code, cookies, body, a, "user=x")
	for _, f := range fronts[1:] { // every front end's connection pooled
		if code, _, body := e.do(f, "GET", a, "/echo?user=x"); code != 200 {
			t.Fatalf("%s: A's user got %d %.200s", f.name, code, body)
		}
	}
	ipA := e.ip(a)

	proxy.Stall()
	ctx := context.Background()
	stop := 0
	if err := e.cli.ContainerStop(ctx, mgrtest.ContainerOf(ctx, e.cli, a), container.StopOptions{Timeout: &stop}); err != nil {
		t.Fatal(err)
	}
	e.waitState(a, "exited", 20*time.Second)
	hostile := e.runHostile(ipA)
	if _, ok := e.mgr.Manager.Cached(a); !ok {
		t.Fatal("the manager dropped A's endpoint: the events are not stalled, the test shows nothing")
	}

	for _, f := range fronts {
		for i, method := range []string{"GET", "POST", "GET"} {
			code, _, body := e.do(f, method, a, "/echo?user=x2")
			if byHostile(code, body, hostile) {
				t.Errorf("%s request %d (%s): A's user got the hostile container's answer: %d %.200s", f.name, i, method, code, body)
				continue
			}
			t.Logf("%s: A's user, request %d (%s), A stopped unseen, a hostile app on its address: %d %.120s", f.name, i, method, code, body)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, resp, err := e.dialWS(wctx, a)
	if err == nil {
		c.CloseNow()
		t.Errorf("A's WebSocket was switched by the hostile container on A's address")
	} else if resp != nil {
		t.Logf("A's WebSocket, a hostile app on its address: %d", resp.StatusCode)
	}
}

// TestDockerStalledEventsDialReensured (#37, 1): as above, on a network
// with room for more: the unconfirmed connection makes the gateway look
// the sandbox up again (the cache dropped), which starts A again on
// another address, and A's user is answered by A, with no error.
func TestDockerStalledEventsDialReensured(t *testing.T) {
	t.Parallel()
	e, proxy := stallEnvOn(t, -1, 29)
	a := dockertest.UniqueID("a")
	f := e.fronts()[0]
	code, cookies, body := e.do(f, "GET", a, "/echo?user=x")
	wantEcho(t, "A's user", code, cookies, body, a, "user=x")
	ipA := e.ip(a)

	proxy.Stall()
	ctx := context.Background()
	stop := 0
	if err := e.cli.ContainerStop(ctx, mgrtest.ContainerOf(ctx, e.cli, a), container.StopOptions{Timeout: &stop}); err != nil {
		t.Fatal(err)
	}
	e.waitState(a, "exited", 20*time.Second)
	hostile := e.runHostile(ipA)
	for i, method := range []string{"GET", "POST"} {
		code, cookies, body := e.do(f, method, a, "/echo?user=x2")
		if byHostile(code, body, hostile) {
			t.Fatalf("request %d (%s): A's user got the hostile container's answer: %d %.200s", i, method, code, body)
		}
		wantEcho(t, "A's user, A restarted", code, cookies, body, a, "user=x2")
		if !e.answeredBy(code, body, a) {
			t.Fatalf("request %d (%s): answered by neither A nor the hostile app: %.200s", i, method, body)
		}
	}
	if ip := e.ip(a); ip == ipA {
		t.Fatalf("A restarted on %s, the hostile container's address", ip)
	}
}

// TestDockerConfirmFailsClosed (#37, 1): the engine stops answering (the
// events stream stays open and quiet, so the cached endpoint is handed out
// unchecked). A new connection to the sandbox, on the exchange's path or a
// WebSocket's, cannot be confirmed, and carries nothing: 503 unconfirmed.
// Once the engine answers again, the same requests are served.
func TestDockerConfirmFailsClosed(t *testing.T) {
	t.Parallel()
	e, proxy := stallEnvOn(t, -1, 29)
	a := dockertest.UniqueID("a")
	f := e.fronts()[0]
	code, cookies, body := e.do(f, "GET", a, "/echo?user=x")
	wantEcho(t, "A's user", code, cookies, body, a, "user=x")
	ep, ok := e.mgr.Manager.Cached(a)
	if !ok {
		t.Fatal("A's endpoint is not cached")
	}

	proxy.Down(true)
	e.gw.InstanceGone(ep.Instance) // no pooled connection: the next request dials
	code, _, body = e.do(f, "GET", a, "/echo?user=x2")
	if code != 503 || errorCode([]byte(body)) != "unconfirmed" {
		t.Errorf("GET with the engine down: %d %.200s, want 503 unconfirmed", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, resp, err := e.dialWS(ctx, a)
	switch {
	case err == nil:
		c.CloseNow()
		t.Error("a WebSocket was switched on a connection the engine could not confirm")
	case resp == nil || resp.StatusCode != 503:
		t.Errorf("WebSocket with the engine down: %v, want 503", err)
	}

	proxy.Down(false)
	code, cookies, body = e.do(f, "GET", a, "/echo?user=x3")
	wantEcho(t, "A's user, the engine back", code, cookies, body, a, "user=x3")
	if c, _, err := e.dialWS(ctx, a); err != nil {
		t.Errorf("WebSocket with the engine back: %v", err)
	} else {
		c.CloseNow()
	}
}

// createSmallNetwork creates network name as a bridge on a /bits subnet
// outside Docker's default pools (createTinyNetwork's, sized).
func createSmallNetwork(t *testing.T, name string, bits int) {
	t.Helper()
	cli := dockertest.Client(t)
	var err error
	size := 1 << (32 - bits)
	for i := range 40 {
		subnet := fmt.Sprintf("10.%d.%d.%d/%d", 200+i%50, rand.IntN(256), size*rand.IntN(256/size), bits)
		_, err = cli.NetworkCreate(context.Background(), name, network.CreateOptions{
			Driver: "bridge", Labels: dockertest.Labels(),
			IPAM:    &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet}}},
			Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
		})
		if err == nil {
			return
		}
	}
	t.Fatalf("create a /%d network: %v", bits, err)
}

// runHostile starts a container no gateway made (the test app, unlabeled
// for any manager) on e's network at ip, and waits for it to answer there.
// It returns its ID.
func (e *dockerEnv) runHostile(ip string) string {
	e.t.Helper()
	ctx := context.Background()
	r, err := e.cli.ContainerCreate(ctx, &container.Config{Image: dockertest.TestAppImage(e.t), Labels: dockertest.Labels()},
		&container.HostConfig{}, &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			e.network: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip}}}},
		nil, "pgtest-hostile-"+dockertest.UniqueID("h"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		e.cli.ContainerRemove(context.Background(), r.ID, container.RemoveOptions{Force: true})
	})
	if err := e.cli.ContainerStart(ctx, r.ID, container.StartOptions{}); err != nil {
		e.t.Fatalf("start the hostile container on %s: %v", ip, err)
	}
	c := &http.Client{Timeout: time.Second}
	testkit.WaitFor(e.t, "the hostile app on "+ip, func() bool {
		resp, err := c.Get("http://" + ip + ":3000/echo")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return byHostile(resp.StatusCode, string(b), r.ID)
	})
	return r.ID
}

// byHostile reports whether body is the echo of the container with ID id
// (by its host name, the ID's prefix).
func byHostile(code int, body, id string) bool {
	var echo struct{ Hostname string }
	return code == 200 && json.Unmarshal([]byte(body), &echo) == nil && echo.Hostname != "" &&
		strings.HasPrefix(id, echo.Hostname)
}
