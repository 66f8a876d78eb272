package upstream

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/wire"
)

// scriptedUpstream answers the n-th request it reads on its conn-th
// connection (both from 0) with answer(conn, n), raw bytes, and counts the
// connections it accepted.
type scriptedUpstream struct {
	addr    string
	accepts atomic.Int32
}

func newScriptedUpstream(t *testing.T, answer func(conn, n int) string) *scriptedUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &scriptedUpstream{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex // guards conns
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ci := int(u.accepts.Add(1) - 1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					req.Body.Close()
					if _, err := io.WriteString(c, answer(ci, n)); err != nil {
						return
					}
				}
			})
		}
	})
	return u
}

func get(t *testing.T, p *Pool, ctx context.Context, addr string) *Response {
	t.Helper()
	resp, err := p.Exchange(ctx, &Request{Instance: "inst", Addr: addr, Method: http.MethodGet, Path: "/", Host: "app"})
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return resp
}

func readAll(t *testing.T, resp *Response) string {
	t.Helper()
	b, err := io.ReadAll(&resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

// TestExchangeOwnsReuse: whatever the caller does with a body, a
// connection goes back to the pool only when that body was read exactly
// to its end (invariant 3, enforced by Body.Close). Each case makes one
// exchange, treats its body as the case says, then makes a second one and
// checks whether it came on the first connection and what it read.
func TestExchangeOwnsReuse(t *testing.T) {
	const ok2 = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	const second = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"
	cases := []struct {
		name      string
		first     string
		rest      string // what the upstream sends before its next answer on the first connection
		use       func(t *testing.T, resp *Response, cancel func())
		wantReuse bool
	}{
		{"read to the end", ok2, "", func(t *testing.T, r *Response, _ func()) { readAll(t, r); r.Body.Close() }, true},
		{"released without Close after the end", ok2, "", func(t *testing.T, r *Response, _ func()) { readAll(t, r) }, true},
		{"chunked to the end", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "",
			func(t *testing.T, r *Response, _ func()) { readAll(t, r); r.Body.Close() }, true},
		// Half the body comes now, the rest only with the next request: a
		// caller that read what was there left nothing buffered, so only
		// the framing tells that the body is not over.
		{"closed early", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234", "56789", func(t *testing.T, r *Response, _ func()) {
			if _, err := io.ReadFull(&r.Body, make([]byte, 5)); err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
		}, false},
		{"released unread", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", "0123456789", func(*testing.T, *Response, func()) {}, false},
		{"more than Content-Length", ok2 + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale", "", func(t *testing.T, r *Response, _ func()) { readAll(t, r); r.Body.Close() }, false},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "",
			func(t *testing.T, r *Response, _ func()) { readAll(t, r); r.Body.Close() }, false},
		{"context ended", ok2, "", func(t *testing.T, r *Response, cancel func()) { readAll(t, r); cancel(); r.Body.Close() }, false},
		{"a 101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", "",
			func(t *testing.T, r *Response, _ func()) { r.Body.Close() }, false},
	}
	for _, tc := range cases {
		for _, kind := range ctxKinds {
			t.Run(tc.name+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				u := newScriptedUpstream(t, func(conn, n int) string {
					switch {
					case conn == 0 && n == 0:
						return tc.first
					case conn == 0 && n == 1:
						return tc.rest + second
					}
					return second
				})
				p := NewPool()
				t.Cleanup(p.CloseIdle)
				ctx, cancel := kind.make(t.Context())
				resp := get(t, p, ctx, u.addr)
				tc.use(t, resp, cancel)
				Release(resp)
				resp = get(t, p, t.Context(), u.addr)
				body := readAll(t, resp)
				Release(resp)
				if body != "second" {
					t.Errorf("second exchange read %q, want %q", body, "second")
				}
				if got := u.accepts.Load() == 1; got != tc.wantReuse {
					t.Errorf("second exchange on the first connection: got %v, want %v (%d connections)", got, tc.wantReuse, u.accepts.Load())
				}
			})
		}
	}
}

// ctxKinds are the two ways an exchange watches its context: a hook of
// its own (any cancellable context), or the context's wire.Abort (the
// lean loop's requests). Both must end and refuse to pool alike.
var ctxKinds = []struct {
	name string
	make func(context.Context) (context.Context, context.CancelFunc)
}{
	{"own hook", context.WithCancel},
	{"abort", func(parent context.Context) (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(parent)
		return wire.WithAbort(ctx), cancel
	}},
}

// TestExchangeEndsWithContext: an exchange blocked on an upstream that
// stalls, in its head or mid-body, fails as soon as its context ends,
// and its connection is closed, not pooled; on the lean loop's context
// (wire.Abort) too, including a second exchange under the same context
// at once (the Abort holds one connection; the other takes its own hook).
func TestExchangeEndsWithContext(t *testing.T) {
	const stalled = "stall"
	for _, stall := range []string{"head", "body"} {
		for _, kind := range ctxKinds {
			t.Run(stall+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				u := newScriptedUpstream(t, func(conn, n int) string {
					if conn < 2 && n == 0 {
						if stall == "head" {
							return "HTTP/1.1 200 OK\r\n" // and nothing more
						}
						return "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234"
					}
					return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
				})
				p := NewPool()
				t.Cleanup(p.CloseIdle)
				ctx, cancel := kind.make(t.Context())
				errs := make(chan error, 2)
				for range 2 {
					go func() {
						resp, err := p.Exchange(ctx, &Request{Instance: "inst", Addr: u.addr, Method: http.MethodGet, Path: "/", Host: "app", Fresh: true})
						if err == nil {
							_, err = io.ReadAll(&resp.Body)
							Release(resp)
						}
						errs <- err
					}()
				}
				for u.accepts.Load() < 2 {
					time.Sleep(time.Millisecond) // both exchanges under way
				}
				cancel()
				for range 2 {
					if err := <-errs; err == nil {
						t.Fatal("a stalled exchange succeeded")
					}
				}
				resp := get(t, p, t.Context(), u.addr)
				body := readAll(t, resp)
				Release(resp)
				if body != "ok" || u.accepts.Load() != 3 {
					t.Errorf("next exchange read %q on connection %d, want %q on a third", body, u.accepts.Load(), "ok")
				}
			})
		}
	}
}
