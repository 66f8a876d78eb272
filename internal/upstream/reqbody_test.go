package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// readRelease reads resp's body and releases it.
func readRelease(t *testing.T, resp *Response) string {
	t.Helper()
	defer Release(resp)
	return readAll(t, resp)
}

// post exchanges a POST of body (length cl; -1 unknown) on p.
func post(t *testing.T, p *Pool, ctx context.Context, addr string, body io.Reader, cl int64, trailer http.Header, expect bool) (*Response, error) {
	t.Helper()
	return p.Exchange(ctx, &Request{Instance: "inst", Addr: addr, Method: http.MethodPost, Path: "/up", Host: "app",
		Body: body, ContentLength: cl, Trailer: trailer, Expect100: expect, Caller: expectField(expect)})
}

// expectField writes "Expect: 100-continue" as the gateway's fields carry
// it on.
type expectField bool

func (e expectField) WriteFields(w *bufio.Writer) {
	if e {
		w.WriteString("Expect: 100-continue\r\n")
	}
}
func (expectField) Interim(*Response) {}

// TestBodyFraming: a body of known length goes with Content-Length, one of
// unknown length chunked with the client's trailers (framing fields a
// client declares as trailers are dropped), an Expect: 100-continue body
// after the app's 100 Continue, and a bodiless POST declares a length of
// 0; each arrives whole, and the connection is reused after each.
func TestBodyFraming(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	app := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %q %v %q %q %v", r.ContentLength, b, r.TransferEncoding, r.Trailer.Get("X-Sum"), r.Header.Get("Content-Length"), err)
	}))
	app.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	app.Start()
	defer app.Close()
	p := NewPool()
	defer p.CloseIdle()
	addr := app.Listener.Addr().String()
	for _, tc := range []struct {
		name    string
		body    io.Reader
		cl      int64
		trailer http.Header
		expect  bool
		want    string
	}{
		{"length", strings.NewReader("hello"), 5, nil, false, `5 "hello" [] "" "5" <nil>`},
		{"chunked", io.MultiReader(strings.NewReader("hel"), strings.NewReader("lo")), -1, nil, false, `-1 "hello" [chunked] "" "" <nil>`},
		{"trailer", strings.NewReader("hello"), 5, http.Header{"X-Sum": {"42"}, "Content-Length": {"9"}}, false,
			`-1 "hello" [chunked] "42" "" <nil>`},
		{"expect", strings.NewReader("hello"), 5, nil, true, `5 "hello" [] "" "5" <nil>`},
		{"none", nil, 0, nil, false, `0 "" [] "" "0" <nil>`},
	} {
		resp, err := post(t, p, context.Background(), addr, tc.body, tc.cl, tc.trailer, tc.expect)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := readRelease(t, resp); got != tc.want {
			t.Errorf("%s: the app saw %s, want %s", tc.name, got, tc.want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 5 exchanges, want 1 (reused after each whole body)", n)
	}
}

// bodyApp answers each request on a raw connection with answer, after
// reading its head only (read: and then its whole body, by
// Content-Length), and counts connections.
func bodyApp(t *testing.T, readBody bool, answer string) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	u := newRawServer(t, func(c net.Conn) {
		n.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if readBody {
				io.Copy(io.Discard, req.Body)
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
			if !readBody {
				// Never reads again: the rest of the body stays unread.
				c.SetReadDeadline(time.Now().Add(time.Minute))
				io.Copy(io.Discard, io.LimitReader(c, 0))
				<-t.Context().Done()
				return
			}
		}
	})
	return u, &n
}

// newRawServer serves each connection with serve until the test ends.
func newRawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestBodyReuse: an app that answers before it read the body, and never
// reads it, has its answer delivered at once; the connection, its body
// not sent whole, is never reused. An app that sends more than its answer
// after a POST loses the connection too.
func TestBodyReuse(t *testing.T) {
	t.Parallel()
	t.Run("answer first", func(t *testing.T) {
		t.Parallel()
		addr, conns := bodyApp(t, false, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		p := newPool(300 * time.Millisecond)
		defer p.CloseIdle()
		for i := range 2 {
			t0 := time.Now()
			resp, err := post(t, p, context.Background(), addr, bytes.NewReader(make([]byte, 64<<20)), 64<<20, nil, false)
			if err != nil {
				t.Fatalf("exchange %d: %v", i, err)
			}
			if got := readRelease(t, resp); got != "ok" {
				t.Fatalf("exchange %d: got %q, want ok", i, got)
			}
			if d := time.Since(t0); d > 10*time.Second {
				t.Fatalf("exchange %d took %v", i, d)
			}
		}
		if n := conns.Load(); n != 2 {
			t.Errorf("%d connections for 2 exchanges whose bodies the app never read, want 2 (none reused)", n)
		}
	})
	t.Run("extra bytes", func(t *testing.T) {
		t.Parallel()
		addr, conns := bodyApp(t, true, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nplant!")
		p := NewPool()
		defer p.CloseIdle()
		for i := range 2 {
			resp, err := post(t, p, context.Background(), addr, strings.NewReader("body"), 4, nil, false)
			if err != nil {
				t.Fatalf("exchange %d: %v", i, err)
			}
			if got := readRelease(t, resp); got != "ok" {
				t.Fatalf("exchange %d: got %q, want ok (never the planted answer)", i, got)
			}
		}
		if n := conns.Load(); n != 2 {
			t.Errorf("%d connections, want 2: one that held more than its answer is not reused", n)
		}
	})
}

// TestBodyWriteBound: an app that takes the request head but never reads
// its body nor answers fails the exchange within the write bound, not
// when the client gives up (invariant 5).
func TestBodyWriteBound(t *testing.T) {
	t.Parallel()
	addr := newRawServer(t, func(c net.Conn) { <-t.Context().Done() })
	p := newPool(300 * time.Millisecond)
	defer p.CloseIdle()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := post(t, p, ctx, addr, bytes.NewReader(make([]byte, 64<<20)), 64<<20, nil, false)
	if err == nil {
		Release(resp)
		t.Fatal("a sandbox that reads nothing took a 64 MiB body")
	}
	if ctx.Err() != nil {
		t.Fatalf("the write was not bounded: it ended with the request's context: %v", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Exchange: %v, want the write deadline's timeout", err)
	}
}

// failingBody fails its read after some bytes, as a client body that
// timed out or went over max_body does.
type failingBody struct {
	n   int
	err error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, b.err
	}
	n := min(len(p), b.n)
	b.n -= n
	return n, nil
}

// TestBodyReadError: a client body that fails ends the exchange with its
// own error, not the upstream failure the cut connection causes, and
// never an ErrUnanswered (nothing is sent twice).
func TestBodyReadError(t *testing.T) {
	t.Parallel()
	addr, _ := bodyApp(t, true, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	p := NewPool()
	defer p.CloseIdle()
	errSlow := errors.New("body too slow")
	for _, cl := range []int64{1 << 20, -1} {
		resp, err := post(t, p, context.Background(), addr, &failingBody{n: 1000, err: errSlow}, cl, nil, false)
		if err == nil {
			Release(resp)
			t.Fatalf("length %d: a failed body got an answer", cl)
		}
		if !errors.Is(err, errSlow) || errors.Is(err, ErrUnanswered) {
			t.Fatalf("length %d: Exchange: %v, want the body's own error", cl, err)
		}
	}
}

// TestBodyFirstPiece: a body is read up to its first bytes before the
// head goes out. One that fails at once sends the app nothing (not even
// the head: it would take it for an empty request) and its error wraps
// ErrRequestBody; the first piece of a body whose exchange failed to dial
// goes out whole when the caller repeats the exchange elsewhere.
func TestBodyFirstPiece(t *testing.T) {
	t.Parallel()
	var heads atomic.Int32
	// A keep-alive app: the pool reuses the connection of one exchange
	// for the next (a server that closed it unannounced made the next
	// exchange race its FIN).
	addr := newRawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			heads.Add(1)
			b, err := io.ReadAll(r.Body)
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(fmt.Sprintf("%q %v", b, err)), fmt.Sprintf("%q %v", b, err))
		}
	})
	p := NewPool()
	defer p.CloseIdle()
	errBad := errors.New("invalid byte in chunk length")
	for _, cl := range []int64{5, -1} {
		_, err := post(t, p, context.Background(), addr, &failingBody{err: errBad}, cl, nil, false)
		if !errors.Is(err, ErrRequestBody) || !errors.Is(err, errBad) {
			t.Fatalf("length %d: Exchange: %v, want ErrRequestBody and the body's error", cl, err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := heads.Load(); n != 0 {
		t.Fatalf("the app got %d request heads of bodies that failed at once, want none", n)
	}
	for _, cl := range []int64{11, -1} {
		req := &Request{Instance: "inst", Addr: testkit.DeadAddr(t), Method: http.MethodPost, Path: "/up", Host: "app",
			Body: io.MultiReader(strings.NewReader("hello "), strings.NewReader("world")), ContentLength: cl}
		if _, err := p.Exchange(context.Background(), req); err == nil || errors.Is(err, ErrRequestBody) {
			t.Fatalf("length %d: dial to a dead address: %v, want a dial error", cl, err)
		}
		req.Addr = addr
		resp, err := p.Exchange(context.Background(), req)
		if err != nil {
			t.Fatalf("length %d: the repeated exchange: %v", cl, err)
		}
		if got := readRelease(t, resp); got != `"hello world" <nil>` {
			t.Errorf("length %d: the app got %s, want the whole body", cl, got)
		}
	}
}
