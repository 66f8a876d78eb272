package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// crashMsg is what the crashing app prints, as a dev server with a bad
// import would; hostile additions try to end the SSE event, fake a ready
// phase and inject markup.
const crashMsg = "Error: Cannot find module './missing'"

const crashHostile = crashMsg + "\n\ndata: {\"phase\":\"ready\"}\n\n<img id=pwn src=x onerror=alert(1)>"

// running reports whether sandbox id has a running container.
func (e *dockerEnv) running(t *testing.T, id string) bool {
	t.Helper()
	list, err := e.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("name", "^/"+mgrtest.ContainerOf(context.Background(), e.cli, id)+"$"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.State == "running" {
			return true
		}
	}
	return false
}

// Done means 2 (#16): an app that prints an error and exits. Chromium
// navigating to it sees that error on the failure page within a few
// seconds, with a retry button and the right title; the hostile output is
// text, not markup, and does not fake a ready event; the JSON error
// carries the same; and the container is not left running.
func TestBrowserFailurePage(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) {
		c.Domains = config.StringList{"localhost"}
		c.Templates["app"].Env = map[string]string{"CRASH": crashHostile}
	})
	ctx := browsertest.New(t, 90*time.Second)
	_, port, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	id := dockertest.UniqueID("crash")
	tok := testkit.Mint(t, e.cfg, id, 10*time.Minute)
	preview := fmt.Sprintf("http://sandbox-%s.localhost:%s", id, port)

	t0 := time.Now()
	browsertest.Navigate(t, ctx, preview+"/?access_token="+tok)
	logs, err := chromedp.Run(ctx, chromedp.Poll[string](
		`document.getElementById("main").className === "failed" ? document.getElementById("logs").textContent : null`,
		chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("failure not shown: %v", err)
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("failure shown after %s, want within a few seconds", took)
	}
	if !strings.Contains(logs, crashMsg) || !strings.Contains(logs, "<img id=pwn") {
		t.Errorf("got logs %q, want the app's error, markup as text", logs)
	}
	type pageState struct {
		Title, Heading, Msg string
		Retry, Pwned        bool
	}
	state, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](`({Title: document.title, Heading: document.getElementById("title").textContent,
		Msg: document.getElementById("msg").textContent, Retry: getComputedStyle(document.getElementById("retry")).display !== "none",
		Pwned: document.getElementById("pwn") !== null})`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(state.Title, "Starting") || !strings.Contains(state.Title, "failed") {
		t.Errorf("got title %q, want a failure title", state.Title)
	}
	if !strings.Contains(state.Msg, "exit") || !state.Retry || state.Pwned {
		t.Errorf("got %+v, want the exit reason, a retry button, no injected element", state)
	}
	if e.running(t, id) {
		t.Errorf("container still running after the failed start")
	}

	// The JSON error says the same (another wake: it fails the same way).
	resp := testkit.Request(t, e.srv, "GET", "sandbox-"+id+".localhost", "/", testkit.Mint(t, e.cfg, id, time.Minute),
		"Accept", "application/json")
	body := wantStatus(t, resp, 502) // not 504: that is the ready timeout's (#24, 6)
	var got struct {
		Error, Code, Reason string
		ExitCode            *int `json:"exit_code"`
		Logs                []string
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if !slices.Contains([]string{sandboxmgr.ReasonExited, sandboxmgr.ReasonCrashLoop}, got.Reason) ||
		got.Code != "sandbox_exited" || got.ExitCode == nil || *got.ExitCode != 1 || !slices.ContainsFunc(got.Logs, func(l string) bool { return strings.Contains(l, crashMsg) }) {
		t.Errorf("got %s, want reason exited or crash_loop, exit code 1, the app's error in logs", body)
	}
	if e.running(t, id) {
		t.Errorf("container still running after the second failed start")
	}
}

// An app that never listens: the 504 says so, and the container behind it
// is stopped, not left running.
func TestDockerReadyTimeoutStopsContainer(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) {
		c.Templates["app"].Env = map[string]string{"NEVER_LISTEN": "1"}
		c.Templates["app"].Ready.Timeout = config.Duration(4 * time.Second) // time to print under load
		c.Templates["app"].ColdStart = config.ColdStartBlock                // the error page, not the waiting page
	})
	id := dockertest.UniqueID("never")
	resp := testkit.Request(t, e.srv, "GET", "sandbox-"+id+"."+testDomain, "/", testkit.Mint(t, e.cfg, id, time.Minute),
		"Accept", "text/html")
	body := string(wantStatus(t, resp, 504))
	for _, want := range []string{"<title>Preview failed to start</title>", "did not answer in time", "NEVER_LISTEN=1", "Retry"} {
		if !strings.Contains(body, want) {
			t.Errorf("got page %s, want %q in it", body, want)
		}
	}
	if e.running(t, id) {
		t.Errorf("container still running after the 504")
	}
}

// A template whose image the engine lacks: the first request says so, as
// JSON and as a page, instead of a bare 502 (#16).
func TestDockerMissingImageAnswer(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) {
		c.Templates["app"].Image = "previewgate-test-missing:nope"
		c.Templates["app"].ColdStart = config.ColdStartBlock // the error page, not the waiting page
	})
	id := dockertest.UniqueID("noimage")
	host := "sandbox-" + id + "." + testDomain
	resp := testkit.Request(t, e.srv, "GET", host, "/", testkit.Mint(t, e.cfg, id, time.Minute), "Accept", "application/json")
	body := wantStatus(t, resp, 502)
	var got struct{ Error, Code, Reason string }
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if got.Code != "sandbox_failed" || got.Reason != sandboxmgr.ReasonImageMissing || !strings.Contains(got.Error, "image is missing") {
		t.Errorf("got %s, want sandbox_failed, reason image_missing and a message naming the image", body)
	}
	resp = testkit.Request(t, e.srv, "GET", host, "/", testkit.Mint(t, e.cfg, id, time.Minute), "Accept", "text/html")
	if page := string(wantStatus(t, resp, 502)); !strings.Contains(page, "image is missing") {
		t.Errorf("got page %s, want the missing image explained", page)
	}
	// Both failed starts are in the sandbox's request log.
	if l := e.traffic.Last(id, 32); len(l) != 2 || l[0].Status != 502 || l[1].Status != 502 {
		t.Errorf("request log: got %+v, want the two 502s", l)
	}
}
