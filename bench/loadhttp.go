package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

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
