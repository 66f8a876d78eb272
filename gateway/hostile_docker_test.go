package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/h1server"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// The hostile-upstream suite (#13) against the real Docker Engine: the
// test app misbehaves on command (testdata/testapp/hostile.go) and every
// client must get exactly its own response, on the lean loop, on net/http
// and over TLS with HTTP/2.

// front is one way clients reach the gateway.
type front struct {
	name   string
	url    string
	client *http.Client
}

// fronts serves e's gateway three ways: the lean HTTP/1.1 loop (e.srv),
// net/http only, and TLS with HTTP/2.
func (e *dockerEnv) fronts() []front {
	e.t.Helper()
	plain := serve(e.t, h1server.New(ServerOptions(e.cfg.Limits), e.gw, testkit.Logger(e.t))) // no lean loop
	s := NewServer(e.cfg, e.gw, testkit.Logger(e.t))
	s.TLSConfig = testkit.TLSConfig("h2", "http/1.1")
	h2 := serve(e.t, s)
	mk := func(tr *http.Transport) *http.Client {
		e.t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	return []front{
		{"lean", e.srv.URL, mk(&http.Transport{MaxIdleConnsPerHost: 64})},
		{"nethttp", plain.URL, mk(&http.Transport{MaxIdleConnsPerHost: 64})},
		{"h2", h2.URL, mk(&http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}})},
	}
}

// do sends method path for sandbox id through f and returns the status,
// the Set-Cookie headers and the body (or the read error).
func (e *dockerEnv) do(f front, method, id, path string) (int, []string, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, f.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = "sandbox-" + id + "." + testDomain
	req.Header.Set("Authorization", "Bearer "+testkit.Mint(e.t, e.cfg, id, time.Minute))
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header["Set-Cookie"], "read error: " + err.Error()
	}
	return resp.StatusCode, resp.Header["Set-Cookie"], string(b)
}

// wantEcho fails unless body is the test app's echo of path for sandbox id
// with no cookie planted.
func wantEcho(t *testing.T, who string, code int, cookies []string, body, id, query string) {
	t.Helper()
	var echo struct {
		Query   string
		Headers http.Header
	}
	if code != 200 || json.Unmarshal([]byte(body), &echo) != nil || len(cookies) > 0 ||
		echo.Headers.Get("X-Forwarded-Host") != "sandbox-"+id+"."+testDomain || echo.Query != query {
		t.Fatalf("%s got %d %q (cookies %q), want sandbox %s's echo of ?%s", who, code, body, cookies, id, query)
	}
}

func TestDockerHostileExtraResponse(t *testing.T) {
	t.Parallel()
	e := newDockerEnv(t, nil)
	id := dockertest.UniqueID("extra")
	for _, f := range e.fronts() {
		for _, later := range []string{"", "&later=1"} {
			for i := range 3 {
				x := fmt.Sprintf("user=x%d%s", i, later)
				code, _, body := e.do(f, "GET", id, "/hostile/extra?"+x)
				if want := "for /hostile/extra?" + x; code != 200 || body != want {
					t.Fatalf("%s: user X got %d %q, want %q", f.name, code, body, want)
				}
				if later != "" {
					// The planted answer comes 20 ms after the real one; it must
					// have landed before Y's request for the pool to see it (one
					// that lands later is read as the answer to that same
					// sandbox's next request: see internal/upstream's doc).
					time.Sleep(time.Second)
				}
				y := fmt.Sprintf("user=y%d", i)
				code, cookies, body := e.do(f, "GET", id, "/echo?"+y)
				wantEcho(t, f.name+": user Y", code, cookies, body, id, y)
			}
		}
	}
}

func TestDockerHostileSwitchCutDrip(t *testing.T) {
	t.Parallel()
	e := newDockerEnv(t, nil)
	id := dockertest.UniqueID("misc")
	for _, f := range e.fronts() {
		if code, _, body := e.do(f, "GET", id, "/hostile/switch"); code != http.StatusBadGateway {
			t.Fatalf("%s: 101 to a GET: got %d %q, want 502", f.name, code, body)
		}
		code, cookies, body := e.do(f, "GET", id, "/echo?after=switch")
		wantEcho(t, f.name+": after the 101", code, cookies, body, id, "after=switch")

		if code, _, body := e.do(f, "GET", id, "/hostile/cut"); code == 200 && !strings.HasPrefix(body, "read error") {
			t.Fatalf("%s: a body cut short arrived whole: %d %q", f.name, code, body)
		}
		code, cookies, body = e.do(f, "GET", id, "/echo?after=cut")
		wantEcho(t, f.name+": after the cut", code, cookies, body, id, "after=cut")

		// A slow drip holds its own request only: others go by meanwhile.
		done := make(chan string, 1)
		go func() {
			_, _, body := e.do(f, "GET", id, "/hostile/drip?n=10&every=100ms")
			done <- body
		}()
		code, cookies, body = e.do(f, "GET", id, "/echo?during=drip")
		wantEcho(t, f.name+": during a drip", code, cookies, body, id, "during=drip")
		if got := <-done; got != strings.Repeat("x", 10) {
			t.Fatalf("%s: drip got %q", f.name, got)
		}

		// An app that never reads a request body holds that request only,
		// and lets go of it when its client does.
		ctx, cancel := context.WithCancel(context.Background())
		stuck := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", f.url+"/hostile/noread", strings.NewReader(strings.Repeat("b", 10<<20)))
			req.Host = "sandbox-" + id + "." + testDomain
			req.Header.Set("Authorization", "Bearer "+testkit.Mint(t, e.cfg, id, time.Minute))
			resp, err := f.client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			stuck <- err
		}()
		time.Sleep(500 * time.Millisecond)
		code, cookies, body = e.do(f, "GET", id, "/echo?during=noread")
		wantEcho(t, f.name+": during a body never read", code, cookies, body, id, "during=noread")
		cancel()
		select {
		case <-stuck:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: a request to an app that never reads its body outlived its client by 10s", f.name)
		}
	}
}

// TestDockerHostileAddressReuse: sandbox A answers with a planted response
// behind its own and exits. On a network with room for one container,
// sandbox B is created on A's address: B's users get B's answers.
func TestDockerHostileAddressReuse(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	name := dockertest.Network(t)
	createTinyNetwork(t, name)
	cfg := testConfig()
	cfg.Templates["app"].Image = dockertest.TestAppImage(t)
	cfg.Templates["app"].Ready = config.Ready{Path: "/", Timeout: config.Duration(20 * time.Second)}
	e := &dockerEnv{t: t, cli: cli, cfg: cfg, network: name}
	e.start()
	a, b := dockertest.UniqueID("a"), dockertest.UniqueID("b")
	for _, f := range e.fronts() {
		e.do(f, "GET", a, "/echo") // A's connections pooled on this front too
	}
	ipA := e.ip(a)
	f := e.fronts()[0]
	if code, _, body := e.do(f, "GET", a, "/hostile/exit?user=x"); code != 200 || body != "for /hostile/exit?user=x" {
		t.Fatalf("A: got %d %q", code, body)
	}
	e.waitState(a, "exited", 20*time.Second)
	for i, f := range e.fronts() {
		code, cookies, body := e.do(f, "GET", b, "/echo?user=y")
		wantEcho(t, f.name+": B's user", code, cookies, body, b, "user=y")
		if i == 0 {
			if ipB := e.ip(b); ipB != ipA {
				t.Fatalf("B got address %s, A had %s: the network should have had room for one", ipB, ipA)
			}
		}
	}
}

// createTinyNetwork creates the managed network name with room for a single
// container, so a new container must take a dead one's address.
func createTinyNetwork(t *testing.T, name string) { createSmallNetwork(t, name, 30) }

// logTail returns the last bytes container name wrote (stdout and
// stderr, with Docker's stream framing).
func (e *dockerEnv) logTail(name string) string {
	rc, err := e.cli.ContainerLogs(context.Background(), name, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 4<<10))
	return string(b)
}

// ip is the address of sandbox id's container on the env's network.
func (e *dockerEnv) ip(id string) string {
	e.t.Helper()
	c, err := e.cli.ContainerInspect(context.Background(), mgrtest.ContainerOf(context.Background(), e.cli, id))
	if err != nil {
		e.t.Fatal(err)
	}
	if n := c.NetworkSettings.Networks[e.network]; n != nil {
		return n.IPAddress
	}
	e.t.Fatalf("%s has no address on %s", id, e.network)
	return ""
}

// TestDockerRestartNo502: warm keep-alive connections to a sandbox on every
// path, then its container is stopped, killed or OOM-killed; the next 100
// sequential and 50 concurrent requests all get 200.
func TestDockerRestartNo502(t *testing.T) {
	t.Parallel()
	e := newDockerEnv(t, func(cfg *config.Config) {
		cfg.Templates["app"].Memory = 48 << 20
	})
	for _, how := range []string{"stop", "kill", "oom"} {
		id := dockertest.UniqueID(how)
		fronts := e.fronts()
		hammer := func(n int) []string {
			var mu sync.Mutex
			var bad []string
			var wg sync.WaitGroup
			for i := range n {
				f := fronts[i%len(fronts)]
				wg.Go(func() {
					if code, _, body := e.do(f, "GET", id, "/echo"); code != 200 {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("%s: %d %.80q", f.name, code, body))
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			return bad
		}
		if bad := hammer(50); len(bad) > 0 {
			t.Fatalf("before %s: %d failed: %q", how, len(bad), bad)
		}
		ctx := context.Background()
		name := mgrtest.ContainerOf(context.Background(), e.cli, id)
		switch how {
		case "stop":
			timeout := 1
			if err := e.cli.ContainerStop(ctx, name, container.StopOptions{Timeout: &timeout}); err != nil {
				t.Fatal(err)
			}
		case "kill":
			if err := e.cli.ContainerKill(ctx, name, "KILL"); err != nil {
				t.Fatal(err)
			}
		case "oom":
			e.do(fronts[0], "GET", id, "/hostile/oom")
		}
		e.waitState(id, "exited", 30*time.Second)
		if how == "oom" {
			c, err := e.cli.ContainerInspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if !c.State.OOMKilled {
				// Seen once in CI (no kernel OOM kill in dmesg either): the
				// app died another way. The property under test, no 502
				// after an unexpected exit, holds either way; say how.
				t.Logf("the container exited without an OOM kill: exit %d %q; its output ends %q",
					c.State.ExitCode, c.State.Error, e.logTail(name))
			}
		}
		for i := range 100 {
			f := fronts[i%len(fronts)]
			if code, _, body := e.do(f, "GET", id, "/echo"); code != 200 {
				t.Fatalf("after %s, request %d on %s: got %d %.200q, want 200", how, i, f.name, code, body)
			}
		}
		if bad := hammer(50); len(bad) > 0 {
			t.Fatalf("after %s: %d of 50 concurrent failed: %q", how, len(bad), bad)
		}
	}
}
