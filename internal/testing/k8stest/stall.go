package k8stest

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// WatchProxy serves the API server's API on a TLS listener of its own and
// can stall the informers' watches: a watch with a label selector stays
// open and passes nothing on, which a client cannot tell from a quiet one
// (a hung API server, a silent partition). Watches of one object (a field
// selector) and every other call pass through untouched.
type WatchProxy struct {
	srv     *httptest.Server
	stalled atomic.Bool
}

// NewWatchProxy starts a proxy in front of c until t ends.
func NewWatchProxy(t testing.TB, c *Cluster) *WatchProxy {
	t.Helper()
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAData)
	p := &WatchProxy{}
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
func (p *WatchProxy) Config(token string) *rest.Config {
	return &rest.Config{Host: p.srv.URL, BearerToken: token, QPS: 1000, Burst: 2000,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

// Stall swallows what the informers' watches carry from now on.
func (p *WatchProxy) Stall() { p.stalled.Store(true) }

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
