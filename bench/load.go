package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
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

// httpLoad is a lean HTTP/1.1 keep-alive client (wrk-like): one goroutine
// per connection writes a prebuilt request and parses just enough of the
// response (status, Content-Length or chunked) to read the next one.
func httpLoad(j job) result {
	var tc *tls.Config
	if j.TLS {
		var err error
		if tc, err = tlsConfig(j); err != nil {
			return result{Err: err.Error()}
		}
	}
	req := []byte("GET " + j.Path + " HTTP/1.1\r\nHost: " + j.Host + "\r\nUser-Agent: pgbench\r\nAccept: */*\r\n")
	if j.Cookie != "" {
		req = append(req, "Cookie: "+j.Cookie+"\r\n"...)
	}
	req = append(req, "\r\n"...)

	start := time.Now()
	winStart := start.Add(j.Warmup)
	end := winStart.Add(j.Dur)
	var errs errRecorder
	var total atomic.Int64
	lats := make([][]time.Duration, j.Conns)
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(j.Conns)
	gate := make(chan struct{})
	for i := range j.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1<<14)
			defer func() { lats[i] = mine }()
			if j.Kind == "burst" || j.NewConn {
				// One request per connection: every sample includes the dial.
				ready.Done()
				<-gate
				for first := true; first || (j.NewConn && time.Now().Before(end)); first = false {
					t0 := time.Now()
					c, err := dial(j, tc)
					if err != nil {
						errs.add(err)
						continue
					}
					err = roundTrip(c, bufio.NewReaderSize(c, 64<<10), req)
					c.Close()
					total.Add(1)
					if err != nil {
						errs.add(err)
						continue
					}
					if j.Kind == "burst" || !t0.Before(winStart) {
						mine = append(mine, time.Since(t0))
					}
				}
				return
			}
			c, err := dial(j, tc)
			ready.Done()
			<-gate
			if err != nil {
				errs.add(err)
				return
			}
			br := bufio.NewReaderSize(c, 64<<10)
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				if err := roundTrip(c, br, req); err != nil {
					errs.add(err)
					c.Close()
					if c, err = dial(j, tc); err != nil {
						errs.add(err)
						return
					}
					br.Reset(c)
					continue
				}
				total.Add(1)
				if !t0.Before(winStart) {
					mine = append(mine, time.Since(t0))
				}
			}
			c.Close()
		}()
	}
	ready.Wait()
	close(gate)
	wg.Wait()
	all := slices.Concat(lats...)
	res := result{Requests: int64(len(all)), Total: total.Load(), Errors: errs.n.Load(), Seconds: j.Dur.Seconds(), Err: errs.first}
	if j.Kind == "burst" {
		res.Seconds = time.Since(start).Seconds()
	}
	res.P50, res.P99 = percentiles(all)
	return res
}

func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := min(int(q*float64(len(d))), len(d)-1)
		return float64(d[i]) / 1e6
	}
	return at(0.50), at(0.99)
}

var errStatus = errors.New("unexpected status")

// roundTrip writes req and reads one response, discarding its body.
func roundTrip(c net.Conn, br *bufio.Reader, req []byte) error {
	if _, err := c.Write(req); err != nil {
		return err
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if len(line) < 12 || !bytes.Equal(line[9:12], []byte("200")) {
		return fmt.Errorf("%w: %q", errStatus, bytes.TrimSpace(line))
	}
	length, chunked := int64(-1), false
	for {
		h, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(h) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(h, []byte(":")); ok {
			v = bytes.TrimSpace(v)
			switch {
			case bytes.EqualFold(k, []byte("Content-Length")):
				if length, err = strconv.ParseInt(string(v), 10, 64); err != nil {
					return err
				}
			case bytes.EqualFold(k, []byte("Transfer-Encoding")):
				chunked = bytes.EqualFold(v, []byte("chunked"))
			}
		}
	}
	switch {
	case chunked:
		for {
			l, err := br.ReadSlice('\n')
			if err != nil {
				return err
			}
			l, _, _ = bytes.Cut(bytes.TrimSpace(l), []byte(";"))
			n, err := strconv.ParseInt(string(l), 16, 64)
			if err != nil {
				return err
			}
			if n == 0 {
				for { // trailers
					t, err := br.ReadSlice('\n')
					if err != nil {
						return err
					}
					if len(t) <= 2 {
						return nil
					}
				}
			}
			if _, err := br.Discard(int(n) + 2); err != nil {
				return err
			}
		}
	case length >= 0:
		_, err := br.Discard(int(length))
		return err
	}
	return errors.New("response without length")
}

// wsDial opens a WebSocket to j.Host/j.Path, dialing j.Addr whatever the
// URL says, with the cookie and the preview's own Origin.
func wsDial(ctx context.Context, j job, hc *http.Client) (*websocket.Conn, error) {
	scheme, origin := "ws", "http"
	if j.TLS {
		scheme, origin = "wss", "https"
	}
	h := http.Header{"Origin": {origin + "://" + j.Host}}
	if j.Cookie != "" {
		h.Set("Cookie", j.Cookie)
	}
	c, resp, err := websocket.Dial(ctx, scheme+"://"+j.Host+j.Path, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: h})
	if err != nil && resp != nil && resp.Body != nil {
		// The gateway says why in a JSON body ({"error", "code"}).
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(b))
	}
	return c, err
}

func wsClient(j job) (*http.Client, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", j.Addr)
		},
		MaxIdleConnsPerHost: -1,
	}
	if j.TLS {
		tc, err := tlsConfig(j)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	return &http.Client{Transport: tr}, nil
}

// wsRTT measures echo round trips on one socket, one message at a time.
func wsRTT(j job) result {
	hc, err := wsClient(j)
	if err != nil {
		return result{Err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.Warmup+j.Dur+30*time.Second)
	defer cancel()
	c, err := wsDial(ctx, j, hc)
	if err != nil {
		return result{Errors: 1, Err: err.Error()}
	}
	defer c.CloseNow()
	msg := []byte("0123456789abcdef")
	winStart := time.Now().Add(j.Warmup)
	end := winStart.Add(j.Dur)
	var lats []time.Duration
	var total int64
	for {
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
			return result{Errors: 1, Err: err.Error()}
		}
		if _, _, err := c.Read(ctx); err != nil {
			return result{Errors: 1, Err: err.Error()}
		}
		total++
		if !t0.Before(winStart) {
			lats = append(lats, time.Since(t0))
		}
	}
	res := result{Requests: int64(len(lats)), Total: total, Seconds: j.Dur.Seconds()}
	res.P50, res.P99 = percentiles(lats)
	return res
}

// wsIdle opens j.Conns sockets and holds them without traffic. It prints
// "open N ERRS" when they are up, waits for a line on stdin, closes them all
// (abruptly, like a closed tab) and then prints its JSON result.
func wsIdle(j job) result {
	hc, err := wsClient(j)
	if err != nil {
		return result{Err: err.Error()}
	}
	ctx := context.Background()
	conns := make([]*websocket.Conn, j.Conns)
	var errs errRecorder
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(conns) {
					return
				}
				dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				c, err := wsDial(dctx, j, hc)
				cancel()
				if err != nil {
					errs.add(err)
					continue
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	open := 0
	for _, c := range conns {
		if c != nil {
			open++
		}
	}
	fmt.Printf("open %d %d\n", open, errs.n.Load())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	for _, c := range conns {
		if c != nil {
			c.CloseNow()
		}
	}
	hc.CloseIdleConnections()
	return result{Open: open, Errors: errs.n.Load(), Err: errs.first}
}
