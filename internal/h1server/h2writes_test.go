package h1server

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testkit"
)

// h2Client is a hand-driven HTTP/2 client: it can announce a stream window
// of 0 and never open it, which no well-behaved client library does.
type h2Client struct {
	t   *testing.T
	c   *tls.Conn
	fr  *http2.Framer
	wmu sync.Mutex // serializes writes: a Framer reads and writes concurrently, not writes
}

// write runs f, which writes frames, under h.wmu.
func (h *h2Client) write(f func() error) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if err := f(); err != nil {
		h.t.Error(err)
	}
}

// grant opens stream's window by n every every, until the test ends.
func (h *h2Client) grant(stream uint32, n uint32, every time.Duration) {
	done := make(chan struct{})
	h.t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				h.wmu.Lock()
				h.fr.WriteWindowUpdate(stream, n)
				h.wmu.Unlock()
			}
		}
	}()
}

func dialH2(t *testing.T, addr string, window uint32) *h2Client {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window}); err != nil {
		t.Fatal(err)
	}
	return &h2Client{t: t, c: c, fr: fr}
}

func (h *h2Client) get(stream uint32, path string) {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "sandbox-a.preview.test"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	h.write(func() error {
		return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
	})
}

// streamEnd reads frames until stream ends, acknowledging the server's
// settings, and returns how it ended: "reset", "end" or "closed" (the
// connection), with the DATA bytes that came first.
func (h *h2Client) streamEnd(stream uint32, within time.Duration) (string, int) {
	h.t.Helper()
	h.c.SetReadDeadline(time.Now().Add(within))
	data := 0
	for {
		f, err := h.fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			return "closed", data
		}
		if err != nil {
			h.t.Fatalf("stream %d neither ended nor was reset within %v: %v", stream, within, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.write(h.fr.WriteSettingsAck)
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == stream {
				return "reset", data
			}
		case *http2.DataFrame:
			if f.StreamID == stream {
				data += len(f.Data())
				if f.StreamEnded() {
					return "end", data
				}
			}
		case *http2.HeadersFrame:
			if f.StreamID == stream && f.StreamEnded() {
				return "end", data
			}
		}
	}
}

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
	s := New(cfg, h, nil)
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
			c := dialH2(t, addr, tc.window)
			c.get(1, tc.path)
			if tc.grant > 0 {
				c.grant(1, tc.grant, timeout/3)
			}
			got, n := c.streamEnd(1, 10*time.Second)
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
