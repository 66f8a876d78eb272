package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/metrics"
)

// liveConfig is a gateway fed from a real file by a real config watcher.
type liveConfig struct {
	path    string
	store   *config.Store
	watcher *config.Watcher
	gw      *Gateway
	srv     *httptest.Server
	metrics *metrics.Metrics // the watcher reports reload results here
	results chan string
}

func newLiveConfig(t *testing.T, sb any, content string) *liveConfig {
	t.Helper()
	path, cfg := testkit.WriteConfig(t, content)
	l := &liveConfig{path: path, store: config.NewStore(cfg), metrics: metrics.New(), results: make(chan string, 200)}
	l.gw, l.srv = startGateway(t, cfg, sb)
	var err error
	l.watcher, err = config.NewWatcher(config.WatcherConfig{Path: l.path, Store: l.store, Prepare: l.gw.Prepare,
		Debounce: 50 * time.Millisecond, OnResult: func(r string) {
			l.metrics.ReloadResult(r)
			select {
			case l.results <- r:
			default:
			}
		}}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.watcher.Close() })
	return l
}

// TestReloadUnderLoad rewrites the config file 50 times, alternating valid
// and invalid versions, while clients keep requesting and hold WebSockets:
// no request fails, no socket closes, and each valid version's new route
// answers soon after the write.
func TestReloadUnderLoad(t *testing.T) {
	app := echoApp(t)
	routes := map[string]string{"stable.example.test": app.URL}
	l := newLiveConfig(t, &fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}, testkit.ConfigFile(routes))
	tok := testkit.Mint(t, l.store.Load(), "*", 10*time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var sockets []*websocket.Conn
	for range 4 {
		c, _, err := dialSocket(ctx, l.srv, "sandbox-abc."+testDomain, tok)
		if err != nil {
			t.Fatal(err)
		}
		c.Read(ctx) // hello
		sockets = append(sockets, c)
	}

	var failures, requests atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{}
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				for _, host := range []string{"stable.example.test", "sandbox-abc." + testDomain} {
					req, _ := http.NewRequestWithContext(ctx, "GET", l.srv.URL+"/", nil)
					req.Host = host
					req.Header.Set("Authorization", "Bearer "+tok)
					resp, err := client.Do(req)
					if ctx.Err() != nil {
						return
					}
					requests.Add(1)
					if err != nil || resp.StatusCode != 200 {
						failures.Add(1)
						t.Errorf("request to %s during reloads: %v %v", host, err, resp)
					}
					if resp != nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			}
		})
	}

	var slowest time.Duration
	for i := range 50 {
		if i%2 == 1 {
			// Invalid: unknown key. The old config keeps serving.
			os.WriteFile(l.path, []byte(testkit.ConfigFile(routes)+"bogus_key: 1\n"), 0o600)
			waitResult(t, l.results, config.ResultFailure)
			continue
		}
		host := fmt.Sprintf("r%d.example.test", i)
		routes[host] = app.URL
		written := time.Now()
		os.WriteFile(l.path, []byte(testkit.ConfigFile(routes)), 0o600)
		for {
			r := testkit.Request(t, l.srv, "GET", host, "/", tok)
			if r.StatusCode == 200 {
				break
			}
			if time.Since(written) > 5*time.Second {
				t.Fatalf("route %s not answering 5s after the write (got %d)", host, r.StatusCode)
			}
			time.Sleep(10 * time.Millisecond)
		}
		slowest = max(slowest, time.Since(written))
		waitResult(t, l.results, config.ResultSuccess)
	}
	cancel()
	wg.Wait()
	t.Logf("%d requests during 50 rewrites, %d failed; slowest new route answered %v after its write",
		requests.Load(), failures.Load(), slowest)

	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	for i, c := range sockets {
		if err := c.Write(wctx, websocket.MessageText, []byte("still there")); err != nil {
			t.Fatalf("socket %d closed by reloads: %v", i, err)
		}
		if _, msg, err := c.Read(wctx); err != nil || string(msg) != "still there" {
			t.Fatalf("socket %d: got %q %v after reloads", i, msg, err)
		}
		c.Close(websocket.StatusNormalClosure, "")
	}
	rec := httptest.NewRecorder()
	l.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	resp, body := rec.Result(), rec.Body.Bytes()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `previewgate_config_reloads_total{result="failure"} 25`) {
		t.Errorf("metrics after 25 bad reloads: got %d\n%s", resp.StatusCode, grepLines(body, "reloads"))
	}
}

func waitResult(t *testing.T, results chan string, want string) {
	t.Helper()
	select {
	case got := <-results:
		if got != want {
			t.Fatalf("got reload %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no reload result (want %s)", want)
	}
}

func grepLines(b []byte, sub string) string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestReloadNotBlockedBySlowJWKS: while an admin PUT waits for its JWKS
// fetch (up to 5 s), a SIGHUP reload of the file goes through; the
// watcher holds no lock across that fetch (#25). The check is that the
// reload returned while the fetch was still pending, not a timing.
func TestReloadNotBlockedBySlowJWKS(t *testing.T) {
	fetching, release := make(chan struct{}), make(chan struct{})
	var gaveUp atomic.Bool
	var once sync.Once
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(fetching) })
		select {
		case <-release:
		case <-r.Context().Done():
			gaveUp.Store(true) // the fetch timed out: whoever waited for it was blocked
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"keys":[]}`)
	}))
	defer jwks.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	path, cfg := testkit.WriteConfig(t, testkit.ConfigFile(nil))
	store := config.NewStore(cfg)
	gw, _ := startGateway(t, cfg, &fakeSandboxes{})
	w, err := config.NewWatcher(config.WatcherConfig{Path: path, Store: store, Prepare: gw.Prepare}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	withJWKS := strings.Replace(testkit.ConfigFile(nil), "  issuers: [test]\n",
		fmt.Sprintf("  issuers: [test]\n  jwks_url: %s\n", jwks.URL), 1)
	replaced := make(chan error, 1)
	go func() {
		_, err := w.Replace([]byte(withJWKS))
		replaced <- err
	}()
	<-fetching

	edited := testkit.ConfigFile(map[string]string{"new.example.test": "http://127.0.0.1:1"})
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if gaveUp.Load() {
		t.Fatal("got the reload back only after the JWKS fetch timed out, want it while the fetch is pending")
	}
	if got := len(store.Load().Routes); got != 1 {
		t.Errorf("got %d routes live after the reload, want 1", got)
	}
	close(release)
	if err := <-replaced; err != nil {
		t.Fatalf("replace: %v", err)
	}
	// The replace began first but went live last: it is the config now,
	// and the file says the same.
	if got := store.Load().Auth.JWKSURL; got != jwks.URL {
		t.Errorf("got jwks_url %q live after the replace, want %q", got, jwks.URL)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), jwks.URL) {
		t.Errorf("got file without the replace's jwks_url, want the live config's file")
	}
}
