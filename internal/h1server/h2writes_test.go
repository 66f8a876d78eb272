package h1server

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// An HTTP/2 client that stops granting a stream window cannot hold the
// stream's handler (and what it holds, a sandbox connection) beyond
// write_timeout per 4 KiB written: the stream is reset and the blocked
// write fails (#13). A client that takes a large write slowly but steadily
// is not reset.
// A stream idle between writes is not reset. (Bytes net/http flushes
// after the handler returned are not watched: h2writes.go says why.)
func TestStalledHTTP2StreamReset(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	cfg := testConfig()
	cfg.Limits.WriteTimeout = config.Duration(timeout)
	ended := make(chan error, 8)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch r.URL.Path {
		case "/big": // blocks in Write once the window is spent
			_, err = w.Write(bytes.Repeat([]byte("x"), 8<<10))
		case "/copy": // the proxy's copy buffer, taken slowly
			_, err = w.Write(bytes.Repeat([]byte("x"), 32<<10))
		case "/idle": // an SSE-like stream, idle for longer than the timeout
			w.Write([]byte("one"))
			http.NewResponseController(w).Flush()
			time.Sleep(3 * timeout)
			_, err = w.Write([]byte("two"))
		}
		ended <- err
	})
	s := New(optionsOf(cfg), h, nil)
	s.TLSConfig = testkit.TLSConfig("h2")
	addr := serve(t, s).Listener.Addr().String()

	for _, tc := range []struct {
		path    string
		window  uint32
		grant   uint32 // bytes of window granted every timeout/3
		want    string
		wantLen int
		wantErr bool
	}{
		{"/big", 0, 0, "reset", 0, true},
		{"/big", 1000, 0, "reset", 0, true},
		{"/idle", 65535, 0, "end", len("onetwo"), false},
		// 4 KiB per timeout/3: 32 KiB in about 2.7 timeouts, within the 8
		// it may take (a timeout per 4 KiB).
		{"/copy", 4096, 4096, "end", 32 << 10, false},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/")+"/window="+strconv.Itoa(int(tc.window)), func(t *testing.T) {
			c := testkit.DialH2(t, addr, tc.window)
			c.Get(1, "sandbox-a.preview.test", tc.path)
			if tc.grant > 0 {
				c.Grant(1, tc.grant, timeout/3)
			}
			got, n := c.StreamEnd(1, 10*time.Second)
			if got != tc.want {
				t.Fatalf("stream %s after %d bytes, want %s", got, n, tc.want)
			}
			if tc.want == "end" && n != tc.wantLen {
				t.Errorf("got %d bytes, want %d", n, tc.wantLen)
			}
			select {
			case err := <-ended:
				if (err != nil) != tc.wantErr {
					t.Errorf("handler's write error %v, want error %v", err, tc.wantErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not return")
			}
		})
	}
}

// TestShutdownEndsStalledHTTP2Stream: a graceful Shutdown does not wait
// until its deadline for an HTTP/2 stream whose client withholds its
// window (#24, item 8): the write watch keeps going while the server
// drains, and at the default write_timeout too, the stalled write is
// reset long before the deadline.
func TestShutdownEndsStalledHTTP2Stream(t *testing.T) {
	t.Parallel()
	cfg := testConfig() // write_timeout at its default, longer than a drain should take
	ended := make(chan error, 1)
	s := New(optionsOf(cfg), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := w.Write(bytes.Repeat([]byte("x"), 8<<10)) // blocks: no window
		ended <- err
	}), nil)
	s.TLSConfig = testkit.TLSConfig("h2")
	c := testkit.DialH2(t, serve(t, s).Listener.Addr().String(), 0)
	c.Get(1, "sandbox-a.preview.test", "/")
	testkit.WaitFor(t, "the stream's write under watch", func() bool { return s.streams.writing() > 0 })

	const deadline = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	if got, _ := c.StreamEnd(1, deadline/3); got == "end" {
		t.Fatalf("stalled stream ended normally, want it reset")
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(deadline / 3):
		t.Fatalf("Shutdown still waiting %v into its %v deadline", deadline/3, deadline)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the stalled write succeeded, want it failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return")
	}
}

// writing counts the watched streams with a write in progress.
func (ss *streamSet) writing() int {
	n := 0
	for i := range ss.shards {
		sh := &ss.shards[i]
		sh.mu.Lock()
		for sw := range sh.m {
			if sw.due.Load() != 0 {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}
