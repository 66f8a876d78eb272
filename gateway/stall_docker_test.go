package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// stallEnv is a gateway whose Docker events stream runs through proxy, on
// a network with room for one container, with the manager's re-check
// every recheck (negative: off).
func stallEnv(t *testing.T, recheck time.Duration) (*dockerEnv, *eventsProxy) {
	t.Helper()
	return stallEnvOn(t, recheck, 30)
}

// stallEnvOn is stallEnv on a /bits network.
func stallEnvOn(t *testing.T, recheck time.Duration, bits int) (*dockerEnv, *eventsProxy) {
	t.Helper()
	proxy := newEventsProxy(t)
	name := dockertest.Network(t)
	createSmallNetwork(t, name, bits)
	cfg := testConfig()
	cfg.Docker.Host = proxy.host
	cfg.Templates["app"].Image = dockertest.TestAppImage(t)
	cfg.Templates["app"].Ready = config.Ready{Path: "/", Timeout: config.Duration(20 * time.Second)}
	e := &dockerEnv{t: t, cli: dockertest.Client(t), cfg: cfg, network: name, recheck: recheck}
	e.start()
	return e, proxy
}

// answeredBy reports whether body is the echo of sandbox id's app (by the
// container's host name, its ID's prefix).
func (e *dockerEnv) answeredBy(code int, body, id string) bool {
	var echo struct{ Hostname string }
	return code == 200 && json.Unmarshal([]byte(body), &echo) == nil && echo.Hostname != "" &&
		strings.HasPrefix(e.containerID(id), echo.Hostname)
}

// TestDockerStalledEventsAddressReuse (#21, 1): the events stream stalls
// (open, silent: nothing tells the gateway anything), sandbox A's
// container dies, and sandbox B, woken through the same gateway, gets A's
// address. A's users must never be answered by B's app. With the re-check
// off, only the rule "an address belongs to at most one record" can keep
// them apart: caching B's address drops A's record.
func TestDockerStalledEventsAddressReuse(t *testing.T) {
	t.Parallel()
	e, proxy := stallEnv(t, -1)
	a, b := dockertest.UniqueID("a"), dockertest.UniqueID("b")
	f := e.fronts()[0]
	code, cookies, body := e.do(f, "GET", a, "/echo?user=x")
	wantEcho(t, "A's user", code, cookies, body, a, "user=x")
	ipA := e.ip(a)

	proxy.Stall()
	if err := e.cli.ContainerKill(context.Background(), mgrtest.ContainerOf(context.Background(), e.cli, a), "KILL"); err != nil {
		t.Fatal(err)
	}
	e.waitState(a, "exited", 20*time.Second)
	code, cookies, body = e.do(f, "GET", b, "/echo?user=y")
	wantEcho(t, "B's user", code, cookies, body, b, "user=y")
	if ipB := e.ip(b); ipB != ipA {
		t.Fatalf("B got address %s, A had %s: the network should have had room for one", ipB, ipA)
	}
	// POST first: ReverseProxy's transport for A's instance dials A's
	// address afresh, which is where B now listens.
	for i, method := range []string{"POST", "GET", "POST"} {
		code, _, body := e.do(f, method, a, "/echo?user=x2")
		if e.answeredBy(code, body, b) {
			t.Fatalf("request %d (%s): A's user got B's app's answer: %d %.200s", i, method, code, body)
		}
		t.Logf("A's user, request %d (%s), A dead, B on its address, events stalled: %d %.120s", i, method, code, body)
	}
}

// TestDockerStalledEventsRecheck (#21, 1): as above, but B is created by
// another replica, so this gateway never learns B's address from a wake of
// its own. The re-check, which lists the runtime's sandboxes every
// RecheckEvery whatever the stream's health, must drop A's cached
// endpoint within that bound.
func TestDockerStalledEventsRecheck(t *testing.T) {
	t.Parallel()
	const recheck = time.Second
	e, proxy := stallEnv(t, recheck)
	a, b := dockertest.UniqueID("a"), dockertest.UniqueID("b")
	f := e.fronts()[0]
	code, cookies, body := e.do(f, "GET", a, "/echo?user=x")
	wantEcho(t, "A's user", code, cookies, body, a, "user=x")
	ipA := e.ip(a)

	// The other replica: the same scope and network, straight to the engine.
	labels := dockertest.Labels()
	labels[dockertest.LabelCase] = t.Name()
	other, err := mgrtest.New(mgrtest.Config{Config: sandboxmgr.Config{Network: e.network, Labels: labels, ReapEvery: -1,
		Templates: func(name string) *config.Template { return e.cfg.Templates[name] }}}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })

	proxy.Stall()
	if err := e.cli.ContainerKill(context.Background(), mgrtest.ContainerOf(context.Background(), e.cli, a), "KILL"); err != nil {
		t.Fatal(err)
	}
	e.waitState(a, "exited", 20*time.Second)
	if _, err := other.Ensure(t.Context(), b, e.cfg.Templates["app"]); err != nil {
		t.Fatalf("B through the other replica: %v", err)
	}
	if ipB := e.ip(b); ipB != ipA {
		t.Fatalf("B got address %s, A had %s: the network should have had room for one", ipB, ipA)
	}
	// Within the bound (plus a list call), A's record no longer points at
	// B's address.
	testkit.WaitFor(t, "the re-check to drop A's endpoint", func() bool {
		ep, ok := e.mgr.Manager.Cached(a)
		return !ok || ep.Addr != ipA+":3000"
	})
	for i, method := range []string{"POST", "GET"} {
		code, _, body := e.do(f, method, a, "/echo?user=x2")
		if e.answeredBy(code, body, b) {
			t.Fatalf("request %d (%s): A's user got B's app's answer: %d %.200s", i, method, code, body)
		}
		t.Logf("A's user, request %d (%s), B on A's address through another replica: %d %.120s", i, method, code, body)
	}
}
