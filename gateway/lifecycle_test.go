package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

func TestMayWake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hdr  []string
		want bool
	}{
		{"curl", nil, true},
		{"navigation", []string{"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Sec-Fetch-Site", "none"}, true},
		{"iframe navigation", []string{"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe", "Sec-Fetch-Site", "cross-site"}, true},
		{"background fetch", []string{"Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty", "Sec-Fetch-Site", "same-origin"}, false},
		{"script", []string{"Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "script"}, false},
		{"browser websocket", []string{"Sec-Fetch-Mode", "websocket", "Upgrade", "websocket"}, false},
		{"upgrade claiming navigate", []string{"Sec-Fetch-Mode", "navigate", "Upgrade", "websocket"}, false},
		{"only Sec-Fetch-Site", []string{"Sec-Fetch-Site", "same-origin"}, false},
		{"non-browser websocket", []string{"Upgrade", "websocket"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				r.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			if got := mayWake(r); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// policySandboxes records the options of every EnsureWith and runs
// OnCreate, as a create would.
type policySandboxes struct {
	*fakeSandboxes
	mu     sync.Mutex
	opts   []sandboxmgr.Options
	asleep bool // refuse NoWake callers as asleep
}

func (p *policySandboxes) EnsureWith(ctx context.Context, id string, tpl *config.Template, o sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	p.mu.Lock()
	p.opts = append(p.opts, o)
	p.mu.Unlock()
	if o.NoWake && p.asleep {
		return sandboxmgr.Endpoint{}, sandboxmgr.ErrAsleep
	}
	if o.OnCreate != nil {
		if err := o.OnCreate(); err != nil {
			return sandboxmgr.Endpoint{}, err
		}
	}
	return p.fakeSandboxes.Ensure(ctx, id, tpl)
}

func (p *policySandboxes) last() sandboxmgr.Options {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opts[len(p.opts)-1]
}

func TestEnsureWakePolicy(t *testing.T) {
	t.Parallel()
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			app := echoApp(t)
			cfg := testConfig()
			sb := &policySandboxes{fakeSandboxes: &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, asleep: true}
			_, srv := startGatewayOpts(t, cfg, sb, Options{NetHTTPOnly: fe.netHTTPOnly})
			host := "sandbox-abc." + testDomain
			tok := testkit.Mint(t, cfg, "abc", time.Minute)
			for _, tc := range []struct {
				name       string
				hdr        []string
				wantNoWake bool
				want       int
			}{
				{"api client wakes", nil, false, 200},
				{"navigation wakes", []string{"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}, false, 200},
				{"background fetch is refused while asleep", []string{"Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"}, true, 503},
			} {
				t.Run(tc.name, func(t *testing.T) {
					resp := testkit.Request(t, srv, "GET", host, "/", tok, tc.hdr...)
					if resp.StatusCode != tc.want {
						t.Fatalf("got %d, want %d", resp.StatusCode, tc.want)
					}
					if got := sb.last().NoWake; got != tc.wantNoWake {
						t.Errorf("got NoWake %v, want %v", got, tc.wantNoWake)
					}
					if tc.want == 503 && resp.Header.Get("Retry-After") == "" {
						t.Errorf("503 without Retry-After")
					}
				})
			}
		})
	}
}

func TestEnsureCreateQuota(t *testing.T) {
	t.Parallel()
	app := echoApp(t)
	cfg := testConfig()
	cfg.Limits.CreatesPerSubjectPerHour = 2
	sb := &policySandboxes{fakeSandboxes: &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}}
	_, srv := startGateway(t, cfg, sb)
	tok := testkit.Mint(t, cfg, "*", time.Minute) // subject "tester"
	for i, want := range []int{200, 200, 429} {
		resp := testkit.Request(t, srv, "GET", "sandbox-q"+string(rune('a'+i))+"."+testDomain, "/", tok)
		if resp.StatusCode != want {
			t.Fatalf("create %d: got %d, want %d", i, resp.StatusCode, want)
		}
		if want != 200 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("create %d: refused without Retry-After", i)
		}
	}
}

// TestEnsureCreateQuotaDefault: without creates_per_subject_per_hour in
// the file, one subject holding a sbx "*" token gets half of max_running
// in creates an hour, not every slot (#13); -1 turns the cap off.
func TestEnsureCreateQuotaDefault(t *testing.T) {
	t.Parallel()
	app := echoApp(t)
	for _, tc := range []struct {
		name    string
		limit   int // set before defaults; 0 leaves the default
		refused bool
	}{
		{"default", 0, true},
		{"unlimited", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			if tc.limit != 0 {
				cfg.Limits.CreatesPerSubjectPerHour = tc.limit
			}
			// The promise of the default: one subject holding a sbx "*"
			// token is refused before it holds every max_running slot.
			slots, quota := cfg.Limits.MaxRunning, cfg.Limits.CreatesPerSubjectPerHour
			if tc.refused && (quota <= 0 || quota >= slots) {
				t.Fatalf("default creates_per_subject_per_hour %d with max_running %d: one subject can take every slot", quota, slots)
			}
			sb := &policySandboxes{fakeSandboxes: &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}}
			_, srv := startGateway(t, cfg, sb)
			tok := testkit.Mint(t, cfg, "*", time.Minute)
			for i := range slots {
				resp := testkit.Request(t, srv, "GET", fmt.Sprintf("sandbox-qd%d.%s", i, testDomain), "/", tok)
				want := 200
				if i >= quota && tc.refused {
					want = 429
				}
				if resp.StatusCode != want {
					t.Fatalf("create %d: got %d, want %d", i+1, resp.StatusCode, want)
				}
			}
		})
	}
}

func TestLifecycleError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		err   error
		want  int
		retry int
	}{
		{"asleep", sandboxmgr.ErrAsleep, 503, 5},
		{"quota", &quotaError{limit: 3, retry: 90 * time.Second}, 429, 90},
		{"quota wrapped in capacity", errors.Join(sandboxmgr.ErrCapacity, &quotaError{limit: 3, retry: time.Millisecond}), 429, 1},
		{"other", sandboxmgr.ErrNotReady, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := lifecycleError(tc.err)
			if tc.want == 0 {
				if h != nil {
					t.Fatalf("got %v, want nil", h)
				}
				return
			}
			if h == nil || h.Status != tc.want || h.RetryAfter != tc.retry {
				t.Fatalf("got %+v, want status %d retry %d", h, tc.want, tc.retry)
			}
		})
	}
}

// TestSubjectRunningLimit: limits.max_running_per_subject reaches the
// manager with the token's subject, and its refusal is a clear 429: JSON
// for clients, a page for browsers, with Retry-After (#24, 9).
func TestSubjectRunningLimit(t *testing.T) {
	t.Parallel()
	app := echoApp(t)
	cfg := testConfig()
	cfg.Limits.MaxRunningPerSubject = 3
	sb := &policySandboxes{fakeSandboxes: &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}}
	_, srv := startGateway(t, cfg, sb)
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok)
	resp.Body.Close()
	if o := sb.last(); o.Subject != "tester" || o.SubjectMaxRunning != 3 {
		t.Errorf("got subject %q max %d, want tester and 3", o.Subject, o.SubjectMaxRunning)
	}

	limited := &fakeSandboxes{err: fmt.Errorf("wake: %w", &sandboxmgr.SubjectLimitError{Limit: 3, Running: 3})}
	_, srv = startGateway(t, cfg, limited)
	for _, tc := range []struct {
		accept, ctype, want string
	}{
		{"application/json", "application/json", `"code":"subject_running_limit"`},
		{"text/html", "text/html", "You already have 3 previews running"},
	} {
		resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/", tok, "Accept", tc.accept)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(string(body), tc.want) {
			t.Errorf("Accept %s: got %d Retry-After %q %s\n%.300s, want 429 with %q", tc.accept, resp.StatusCode,
				resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body, tc.want)
		}
	}
}
