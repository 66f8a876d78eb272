package dockertest

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// EventsProxy serves the engine's API on a unix socket of its own and can
// cut the events stream, which is what a client sees when its stream to
// dockerd breaks while the rest of the API still answers, or stall it: the
// stream stays open and says nothing (a hung engine, a silent partition),
// which a client cannot tell from a quiet one.
type EventsProxy struct {
	// Host is the proxy's address as a Docker host ("unix:///…").
	Host string

	mu      sync.Mutex // guards cut and streams
	cut     bool
	streams map[*http.Request]context.CancelFunc
	refused atomic.Int64
	stalled atomic.Bool
}

// stallWriter passes the events stream on unless the proxy is stalled:
// then it swallows what the engine sends (and never flushes).
type stallWriter struct {
	http.ResponseWriter
	p *EventsProxy
}

func (w stallWriter) Write(b []byte) (int, error) {
	if w.p.stalled.Load() {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w stallWriter) Flush() {
	if !w.p.stalled.Load() {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// NewEventsProxy starts a proxy in front of the engine until t ends.
func NewEventsProxy(t testing.TB) *EventsProxy {
	t.Helper()
	c := Client(t)
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
	p := &EventsProxy{Host: "unix://" + sock, streams: make(map[*http.Request]context.CancelFunc)}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" // the transport dials the engine
		},
		Transport:     c.HTTPClient().Transport,
		FlushInterval: -1, // the events stream, as it comes
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
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
		rp.ServeHTTP(stallWriter{w, p}, r.WithContext(ctx))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

// Cut ends the open events streams and refuses new ones (503) until
// Restore.
func (p *EventsProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, cancel := range p.streams {
		cancel()
	}
}

// Restore lets events streams connect again.
func (p *EventsProxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Refused is how many events streams were refused since the proxy started.
func (p *EventsProxy) Refused() int64 { return p.refused.Load() }

// Stall keeps the events streams open but passes none of their events on
// until Unstall (events meanwhile are lost, as a hung engine's would be to
// a client that reconnects only on an error).
func (p *EventsProxy) Stall() { p.stalled.Store(true) }

// Unstall lets events through again.
func (p *EventsProxy) Unstall() { p.stalled.Store(false) }
