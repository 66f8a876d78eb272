package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

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
