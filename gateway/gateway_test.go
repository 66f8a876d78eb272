package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// fakeSandboxes stands in for the sandbox manager in unit tests of the
// handler chain; the integration tests use the real manager.
type fakeSandboxes struct {
	mu      sync.Mutex
	addrs   []string // successive endpoints handed out; the last repeats
	inst    string   // the instance they name ("": none)
	err     error
	late    error // what every Ensure after the first answers, if set (a re-ensure)
	exists  bool  // Known: the sandbox has an instance (of template app)
	ensures atomic.Int32
	forgets atomic.Int32
	lookups atomic.Int32 // Wake, Progress: the wake machinery (Cached is decide's snapshot, memory only)
	held    atomic.Int32
	// confirms counts Confirm calls (new upstream connections); each
	// answers confirmErr.
	confirms   atomic.Int32
	confirmErr error
}

func (f *fakeSandboxes) Ensure(ctx context.Context, id string, tpl *config.Template) (sandboxmgr.Endpoint, error) {
	if f.ensures.Add(1) > 1 && f.late != nil {
		return sandboxmgr.Endpoint{}, f.late
	}
	if f.err != nil {
		return sandboxmgr.Endpoint{}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	addr := f.addrs[0]
	if len(f.addrs) > 1 {
		f.addrs = f.addrs[1:]
	}
	return sandboxmgr.Endpoint{ID: id, Addr: addr, Template: tpl.Name, Instance: f.inst}, nil
}
func (f *fakeSandboxes) EnsureWith(ctx context.Context, id string, tpl *config.Template, _ sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	return f.Ensure(ctx, id, tpl)
}
func (f *fakeSandboxes) Forget(id, addr string) { f.forgets.Add(1) }

// Cached reports every sandbox ready, so navigations are proxied (no
// waiting page) in handler-chain tests.
func (f *fakeSandboxes) Cached(id string) (sandboxmgr.Endpoint, bool) {
	return sandboxmgr.Endpoint{ID: id}, true
}

// Known knows no sandbox: the route's template governs, as for a new one.
func (f *fakeSandboxes) Known(string) (string, bool) {
	if f.exists {
		return "app", true
	}
	return "", false
}
func (f *fakeSandboxes) Wake(string, *config.Template, sandboxmgr.Options) { f.lookups.Add(1) }
func (f *fakeSandboxes) Progress(string) sandboxmgr.Progress {
	return sandboxmgr.Progress{Phase: sandboxmgr.PhaseReady}
}

// perID is the fakes' shape: the manager's calls, each on a sandbox id.
// fakes serves one as Sandboxes, through handles that call it.
type perID interface {
	EnsureWith(ctx context.Context, id string, tpl *config.Template, opts sandboxmgr.Options) (sandboxmgr.Endpoint, error)
	Cached(id string) (sandboxmgr.Endpoint, bool)
	Known(id string) (string, bool)
	Wake(id string, tpl *config.Template, opts sandboxmgr.Options)
	Progress(id string) sandboxmgr.Progress
	Forget(id, addr string)
	Touch(id string)
	Hold(id string) (release func())
}

// fakes is sb as Sandboxes: itself if it is one (a real manager), else a
// perID fake's handles.
func fakes(sb any) Sandboxes {
	if s, ok := sb.(Sandboxes); ok {
		return s
	}
	return perIDs{sb.(perID)}
}

type perIDs struct{ f perID }

func (p perIDs) Sandbox(id string) sandboxmgr.Handle { return fakeHandle{p.f, id} }

// fakeHandle is a fake's sandbox: its snapshot reads Known, Cached and
// Progress; the fakes keep no settings (always fresh, none set).
type fakeHandle struct {
	f  perID
	id string
}

func (h fakeHandle) Snapshot() sandboxmgr.Snapshot {
	var s sandboxmgr.Snapshot
	s.Template, s.Exists = h.f.Known(h.id)
	s.Endpoint, s.Ready = h.f.Cached(h.id)
	s.Fresh, s.Progress = true, h.f.Progress(h.id)
	return s
}

func (h fakeHandle) Ensure(ctx context.Context, tpl *config.Template, o sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	ep, err := h.f.EnsureWith(ctx, h.id, tpl, o)
	if err == nil {
		h.f.Touch(h.id)
	}
	return ep, err
}

func (h fakeHandle) Wake(tpl *config.Template, o sandboxmgr.Options) { h.f.Wake(h.id, tpl, o) }
func (h fakeHandle) Touch()                                          { h.f.Touch(h.id) }
func (h fakeHandle) Hold() func()                                    { return h.f.Hold(h.id) }
func (h fakeHandle) Forget(addr string)                              { h.f.Forget(h.id, addr) }

// Confirm asks the fake if it confirms (confirmer), else confirms.
func (h fakeHandle) Confirm(ctx context.Context, instance, addr string) error {
	if c, ok := h.f.(confirmer); ok {
		return c.Confirm(h.id, instance, addr)
	}
	return nil
}

// confirmer is a fake that answers its handles' Confirm.
type confirmer interface {
	Confirm(id, instance, addr string) error
}

func (f *fakeSandboxes) Confirm(id, instance, addr string) error {
	f.confirms.Add(1)
	return f.confirmErr
}
func (f *fakeSandboxes) Touch(id string) {}
func (f *fakeSandboxes) Hold(id string) func() {
	f.held.Add(1)
	return func() { f.held.Add(-1) }
}

// echoApp mimics the test app: / echoes the request, /ws echoes messages,
// /sse streams events.
func echoApp(t testing.TB) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "path": r.URL.Path,
			"query": r.URL.RawQuery, "host": r.Host, "headers": r.Header})
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.Write(r.Context(), websocket.MessageText, []byte("hello"))
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			c.Write(r.Context(), typ, msg)
		}
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		fmt.Fprint(w, "data: last\n\n")
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// testDomain is the domain of testConfig and testkit.ConfigFile.
const testDomain = testkit.Domain

// testConfig returns a config with one HS256 key and a default template.
func testConfig() *config.Config {
	c := &config.Config{
		Domains: config.StringList{testDomain},
		Auth: config.Auth{Audience: "previewgate", Issuers: []string{"test"},
			Keys: []config.Key{{KID: "k1", Alg: "HS256", Secret: testkit.Secret}}},
		Templates:       map[string]*config.Template{"app": {Image: "testapp"}},
		DefaultTemplate: "app",
	}
	c.ApplyDefaults()
	return c
}

// abcRequest is a request for url, a gateway's, to sandbox abc with tok
// as its bearer token.
func abcRequest(method, url string, body io.Reader, tok string) *http.Request {
	req, _ := http.NewRequest(method, url, body)
	req.Host = "sandbox-abc." + testDomain
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

// dialSocket opens a WebSocket to /ws on host through the gateway at srv,
// with tok as its bearer token.
func dialSocket(ctx context.Context, srv *httptest.Server, host, tok string) (*websocket.Conn, *http.Response, error) {
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws",
		&websocket.DialOptions{Host: host, HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
}

// startGateway runs the real handler chain on the real Server (lean
// HTTP/1.1 loop and net/http).
func startGateway(t testing.TB, cfg *config.Config, sb any) (*Gateway, *httptest.Server) {
	t.Helper()
	return startGatewayOpts(t, cfg, sb, Options{})
}

// startGatewayOpts is startGateway with opts (Options.NetHTTPOnly: on
// net/http alone). sb is a Sandboxes or a perID fake (fakes).
func startGatewayOpts(t testing.TB, cfg *config.Config, sb any, opts Options) (*Gateway, *httptest.Server) {
	t.Helper()
	g, err := New(cfg, fakes(sb), opts, testkit.Logger(t))
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	t.Cleanup(g.Close)
	return g, serve(t, NewServer(cfg, g, testkit.Logger(t)))
}

// serve runs s on a loopback listener until the test ends. The result is
// an httptest.Server only for its URL, Listener and Close.
func serve(t testing.TB, s *Server) *httptest.Server {
	t.Helper()
	return serveOn(t, s, testkit.Listen(t))
}

// serveOn is serve on a given listener.
func serveOn(t testing.TB, s *Server, ln net.Listener) *httptest.Server {
	t.Helper()
	return testkit.ServeOn(t, s, s.HTTP, s.TLSConfig != nil, ln)
}

// TestHeaderValueKeys: headerValue skips Header.Get's canonicalization,
// so every key passed to it must already be canonical, or the lookup
// would miss a header the client sent.
func TestHeaderValueKeys(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`headerValue\([^,() ]+, ("[^"]*"|[^)]*)\)`)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllSubmatch(src, -1) {
			key, err := strconv.Unquote(string(m[1]))
			if err != nil {
				t.Errorf("%s: headerValue with a key that is not a literal: %s", f, m[1])
				continue
			}
			n++
			if c := http.CanonicalHeaderKey(key); c != key {
				t.Errorf("%s: headerValue key %q is not canonical (%q)", f, key, c)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no headerValue calls")
	}
}
