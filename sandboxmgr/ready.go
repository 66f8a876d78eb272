package sandboxmgr

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Readiness (DESIGN: "Readiness"): TCP connect to the app port, then GET
// path (if set) answering below 500. Connects are a few ms apart; HTTP
// retries back off, since a dev server may compile on every GET.
const (
	tcpRetry     = 5 * time.Millisecond
	httpRetryMax = 250 * time.Millisecond
	aliveEvery   = 500 * time.Millisecond // how often to check the container is still up
	dialTimeout  = time.Second
)

// probeClient makes readiness GETs, one connection each: nothing lingers.
var probeClient = &http.Client{
	Transport: &http.Transport{
		DisableKeepAlives: true,
		Proxy:             nil,
		DialContext:       (&net.Dialer{Timeout: dialTimeout}).DialContext,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// waitReady probes addr until it is ready or ctx ends (ErrNotReady, with the
// last probe failure). alive, if set, is called every aliveEvery; its error
// ends the wait (a crashed app will never listen).
func waitReady(ctx context.Context, addr, path string, alive func(context.Context) error) error {
	nextAlive := time.Now().Add(aliveEvery)
	httpDelay := 10 * time.Millisecond
	for {
		delay := tcpRetry
		err := dialOnce(ctx, addr)
		if err == nil {
			if path == "" {
				return nil
			}
			if err = getOnce(ctx, addr, path); err == nil {
				return nil
			}
			delay, httpDelay = httpDelay, min(2*httpDelay, httpRetryMax)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s: %v", ErrNotReady, addr, err)
		}
		if alive != nil && time.Now().After(nextAlive) {
			if aerr := alive(ctx); aerr != nil && ctx.Err() == nil {
				return aerr
			}
			nextAlive = time.Now().Add(aliveEvery)
		}
		if sleep(ctx, delay) != nil {
			return fmt.Errorf("%w: %s: %v", ErrNotReady, addr, err)
		}
	}
}

func dialOnce(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

func getOnce(ctx context.Context, addr, path string) error {
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "previewgate-readiness")
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	return nil
}
