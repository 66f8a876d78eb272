package testkit

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2Client is a hand-driven HTTP/2 client over TLS: it can announce a
// stream window of 0 and never open it, which no well-behaved client
// library does (a hostile client, #13).
type H2Client struct {
	t   testing.TB
	c   *tls.Conn
	fr  *http2.Framer
	wmu sync.Mutex // serializes writes: a Framer reads and writes concurrently, not writes
}

// write runs f, which writes frames, under h.wmu.
func (h *H2Client) write(f func() error) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if err := f(); err != nil {
		h.t.Error(err)
	}
}

// Grant opens stream's window by n every every, until the test ends.
func (h *H2Client) Grant(stream uint32, n uint32, every time.Duration) {
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

// DialH2 connects to addr with TLS and ALPN h2 (any certificate) and
// announces window as every stream's initial window.
func DialH2(t testing.TB, addr string, window uint32) *H2Client {
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
	return &H2Client{t: t, c: c, fr: fr}
}

// Get opens stream with a GET of path at authority, with header fields
// (lowercase names) after the pseudo-headers, and ends its request side.
func (h *H2Client) Get(stream uint32, authority, path string, header ...[2]string) {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range append([][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", path}}, header...) {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	h.write(func() error {
		return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
	})
}

// StreamEnd reads frames until stream ends, acknowledging the server's
// settings, and returns how it ended: "reset", "end" or "closed" (the
// connection), with the DATA bytes that came first.
func (h *H2Client) StreamEnd(stream uint32, within time.Duration) (string, int) {
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
