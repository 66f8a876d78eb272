package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/k8stest"
)

// The proxies the stall and stale tests put between the gateway and its
// runtime's change stream (Docker's events, the API server's watches). A
// stream they stall stays open and says nothing (a hung engine, a silent
// partition), which a client cannot tell from a quiet one.

// stallWriter passes a stream on unless stalled: then it swallows what
// comes (and never flushes).
type stallWriter struct {
	http.ResponseWriter
	stalled *atomic.Bool
}

func (w stallWriter) Write(b []byte) (int, error) {
	if w.stalled.Load() {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w stallWriter) Flush() {
	if !w.stalled.Load() {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// eventsProxy serves the engine's API on a unix socket of its own and can
// cut the events stream, which is what a client sees when its stream to
// dockerd breaks while the rest of the API still answers, or stall it.
type eventsProxy struct {
	host string // the proxy's address as a Docker host ("unix:///…")

	mu      sync.Mutex // guards cut and streams
	cut     bool
	streams map[*http.Request]context.CancelFunc
	refused atomic.Int64
	stalled atomic.Bool
	down    atomic.Bool // every call but the events stream is cut
}

// newEventsProxy starts a proxy in front of the engine until t ends.
func newEventsProxy(t testing.TB) *eventsProxy {
	t.Helper()
	c := dockertest.Client(t)
	// Short: a unix socket's path is at most 107 bytes, t.TempDir's may be more.
	dir, err := os.MkdirTemp("", "pgdocker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p := &eventsProxy{host: "unix://" + sock, streams: make(map[*http.Request]context.CancelFunc)}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" // the transport dials the engine
		},
		Transport:     c.HTTPClient().Transport,
		FlushInterval: -1, // the events stream, as it comes
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			if p.down.Load() {
				panic(http.ErrAbortHandler) // the connection cut, no answer
			}
			rp.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			p.refused.Add(1)
			http.Error(w, "events stream cut by the test", http.StatusServiceUnavailable)
			return
		}
		p.streams[r] = cancel
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.streams, r)
			p.mu.Unlock()
		}()
		rp.ServeHTTP(stallWriter{w, &p.stalled}, r.WithContext(ctx))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

// Cut ends the open events streams and refuses new ones (503).
func (p *eventsProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, cancel := range p.streams {
		cancel()
	}
}

// Refused is how many events streams were refused since the proxy started.
func (p *eventsProxy) Refused() int64 { return p.refused.Load() }

// Stall keeps the events streams open but passes none of their events on
// (events meanwhile are lost, as a hung engine's would be to a client that
// reconnects only on an error).
func (p *eventsProxy) Stall() { p.stalled.Store(true) }

// Down cuts every call but the events stream (down true), as an engine
// that stopped answering while the client's stream stays open; false
// restores them.
func (p *eventsProxy) Down(down bool) { p.down.Store(down) }

// watchProxy serves the API server's API on a TLS listener of its own and
// can stall the informers' watches: a watch with a label selector stays
// open and passes nothing on. Watches of one object (a field selector) and
// every other call pass through untouched.
type watchProxy struct {
	srv     *httptest.Server
	stalled atomic.Bool
}

// newWatchProxy starts a proxy in front of c until t ends.
func newWatchProxy(t testing.TB, c *k8stest.Cluster) *watchProxy {
	t.Helper()
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAData)
	p := &watchProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true},
		FlushInterval: -1,
	}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") == "true" && q.Get("labelSelector") != "" && q.Get("fieldSelector") == "" {
			rp.ServeHTTP(stallWriter{w, &p.stalled}, r)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// Config is c's client config (token) through the proxy.
func (p *watchProxy) Config(token string) *rest.Config {
	return &rest.Config{Host: p.srv.URL, BearerToken: token, QPS: 1000, Burst: 2000,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

// Stall swallows what the informers' watches carry from now on.
func (p *watchProxy) Stall() { p.stalled.Store(true) }
