package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			cfg := testConfig()
			tok := testkit.Mint(t, cfg, "abc", time.Minute)
			tests := []struct {
				name       string
				err        error
				want       int
				retryAfter bool
			}{
				{"not ready", fmt.Errorf("wait: %w", sandboxmgr.ErrNotReady), 504, false},
				{"docker down", fmt.Errorf("inspect: %w", runtime.ErrUnavailable), 503, true},
				{"capacity", sandboxmgr.ErrCapacity, 503, true},
				{"foreign container", fmt.Errorf("sandbox abc: %w", runtime.ErrForeign), 409, false},
				{"other", errors.New("boom"), 502, false},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					_, srv := startGatewayOpts(t, cfg, &fakeSandboxes{err: tc.err}, Options{NetHTTPOnly: fe.netHTTPOnly})
					resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok)
					if resp.StatusCode != tc.want {
						t.Fatalf("got %d, want %d", resp.StatusCode, tc.want)
					}
					if got := resp.Header.Get("Retry-After") != ""; got != tc.retryAfter {
						t.Fatalf("Retry-After present = %v, want %v", got, tc.retryAfter)
					}
					var body struct{ Error, Code string }
					if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Code == "" || body.Error == "" {
						t.Fatalf("got body %+v (%v), want JSON error and code", body, err)
					}
					if strings.Contains(body.Error, "boom") {
						t.Fatalf("internal error leaked to client: %q", body.Error)
					}
				})
			}
		})
	}
}

// TestStartFailureStatuses: one status and code per kind of failed start,
// as the README's table says (#24, 6: an app that exited answered 504,
// which the table ties to the ready timeout).
func TestStartFailureStatuses(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	tests := []struct {
		reason   string
		want     int
		code     string
		exitCode bool
	}{
		{sandboxmgr.ReasonExited, 502, "sandbox_exited", true},
		{sandboxmgr.ReasonCrashLoop, 502, "sandbox_exited", true},
		{sandboxmgr.ReasonReadyTimeout, 504, "not_ready", false},
		{sandboxmgr.ReasonImageMissing, 502, "sandbox_failed", false},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			err := &sandboxmgr.StartError{Reason: tc.reason, ExitCode: 3, Logs: []string{"boom"}, Err: sandboxmgr.ErrNotReady}
			_, srv := startGateway(t, cfg, &fakeSandboxes{err: err})
			resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok, "Accept", "application/json")
			var body struct {
				Code, Reason string
				ExitCode     *int `json:"exit_code"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want || body.Code != tc.code || body.Reason != tc.reason || (body.ExitCode != nil) != tc.exitCode {
				t.Errorf("got %d %+v, want %d code %s reason %s (exit code: %v)", resp.StatusCode, body, tc.want, tc.code, tc.reason, tc.exitCode)
			}
		})
	}
}

func TestErrorPageForBrowsers(t *testing.T) {
	t.Parallel()
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			_, srv := startGatewayOpts(t, testConfig(), &fakeSandboxes{}, Options{NetHTTPOnly: fe.netHTTPOnly})
			resp := testkit.Request(t, srv, "GET", "evil.example", "/", "", "Accept", "text/html,*/*")
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
				!strings.Contains(string(body), "not a preview") {
				t.Fatalf("got %d %q %q, want 404 HTML page", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
		})
	}
}

// TestOutOfMemoryMessage: an app killed at its memory limit is told as
// such, not as a bare exit code 137 (#24 newcomer walk).
func TestOutOfMemoryMessage(t *testing.T) {
	for _, reason := range []string{sandboxmgr.ReasonExited, sandboxmgr.ReasonCrashLoop} {
		he := startFailure(&sandboxmgr.StartError{Reason: reason, ExitCode: 137, OOMKilled: true, Err: sandboxmgr.ErrNotReady})
		if he == nil || !strings.Contains(he.Msg, "out of memory") || !strings.Contains(he.Msg, "memory limit") {
			t.Errorf("%s: got %+v, want a message naming the memory limit", reason, he)
		}
	}
}

// TestReensureOutputTokenOnly: a request already proxied whose sandbox
// then fails to start again (its dial refused, the re-ensure failing
// with the app's output) shows that output to a holder of the sandbox's
// token only: a visitor of a public sandbox (or a share link's) gets the
// failure without it, as before proxying (#37, the fresh attack).
func TestReensureOutputTokenOnly(t *testing.T) {
	t.Parallel()
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Templates["app"].Public = true
			tok := testkit.Mint(t, cfg, "abc", time.Hour)
			for _, tc := range []struct {
				name, tok string
				want      bool
			}{{"anonymous", "", false}, {"token", tok, true}} {
				sb := &fakeSandboxes{exists: true, addrs: []string{testkit.DeadAddr(t)}, late: &sandboxmgr.StartError{
					Reason: sandboxmgr.ReasonExited, ExitCode: 1, Logs: []string{"SECRET-LINE-of-the-app"}, Err: errors.New("exited")}}
				_, srv := startGatewayOpts(t, cfg, sb, Options{NetHTTPOnly: fe.netHTTPOnly})
				resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tc.tok)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if sb.ensures.Load() < 2 {
					t.Fatalf("%s: %d ensures, want the re-ensure after the refused dial (got %d %s)", tc.name, sb.ensures.Load(), resp.StatusCode, body)
				}
				if got := strings.Contains(string(body), "SECRET-LINE"); got != tc.want {
					t.Errorf("%s: the app's output in the answer = %v, want %v: %d %s", tc.name, got, tc.want, resp.StatusCode, body)
				}
			}
		})
	}
}
