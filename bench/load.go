package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// job is what the parent asks a child process to do. The child prints one
// JSON result on stdout (ws-idle also talks over stdin/stdout, see wsIdle).
// Children exist so the gateway's process holds only the gateway: its CPU,
// allocations and memory are then the gateway's alone.
type job struct {
	Kind    string        // http | ws-rtt | ws-idle | burst
	Addr    string        // 127.0.0.1:port or a container ip:port
	Host    string        // Host header (and TLS server name)
	Path    string        // request path
	Cookie  string        // "name=value", or ""
	TLS     bool          // dial TLS, trusting CAFile
	CAFile  string        // PEM of the self-signed bench certificate
	Conns   int           // connections (http), sockets (ws-idle), requests (burst)
	Dur     time.Duration // measured window
	Warmup  time.Duration // before the window; not recorded
	NewConn bool          // http: one request per connection (first byte timing)
}

// result is a child's answer.
type result struct {
	Requests int64   // recorded in the window
	Total    int64   // all completed requests, warmup included (for CPU/allocs per request)
	Errors   int64   // failed requests or dials
	Seconds  float64 // window length
	P50, P99 float64 // milliseconds
	Open     int     // ws-idle: sockets open
	Err      string  // first error seen
}

func runChild(j job) {
	var res result
	switch j.Kind {
	case "http", "burst":
		res = httpLoad(j)
	case "ws-rtt":
		res = wsRTT(j)
	case "ws-idle":
		res = wsIdle(j)
	default:
		res.Err = "unknown job " + j.Kind
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

func tlsConfig(j job) (*tls.Config, error) {
	pem, err := os.ReadFile(j.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no certificate in " + j.CAFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: j.Host, NextProtos: []string{"http/1.1"},
		ClientSessionCache: tls.NewLRUClientSessionCache(1024)}, nil
}

func dial(j job, tc *tls.Config) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", j.Addr, 10*time.Second)
	if err != nil || tc == nil {
		return c, err
	}
	t := tls.Client(c, tc)
	if err := t.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	return t, nil
}

// errRecorder keeps the error count and the first error.
type errRecorder struct {
	n     atomic.Int64
	once  sync.Once
	first string
}

func (e *errRecorder) add(err error) {
	e.n.Add(1)
	e.once.Do(func() { e.first = err.Error() })
}

// percentiles are d's p50 and p99 in ms by nearest rank (0 when empty:
// a result is JSON, which has no NaN).
func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	return pct(d, 50), pct(d, 99)
}
