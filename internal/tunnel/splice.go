package tunnel

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/previewgate/previewgate/internal/upstream"
	"github.com/previewgate/previewgate/internal/wire"
)

// HandshakeTimeout bounds the upgrade handshake: writing the request and
// reading the answer's heads. The socket after it has no such bound.
const HandshakeTimeout = 30 * time.Second

// Handshake writes the upgrade request out on back, asking to switch to
// protocol (its Connection and Upgrade fields are the switch's: set here,
// whatever out holds; no Go default User-Agent is added), and reads the
// final answer within HandshakeTimeout, handing 1xx answers other than 101
// to interim. The heads are read by upstream's reader, within its bounds
// (invariant 2): a head fits here exactly when it fits on the exchange
// (#21). A 101 to
// another protocol than asked for is an error (the response released):
// the client would be handed bytes of a protocol it did not ask for. Any
// other answer is the caller's to pass on. Bytes after the head that the
// reader took are in the returned reader: forward them (ForwardBuffered)
// before the splice. The caller releases the response.
func Handshake(back net.Conn, out *http.Request, protocol string, interim func(*upstream.Response)) (*upstream.Response, *bufio.Reader, error) {
	out.Header["Connection"] = []string{"Upgrade"}
	out.Header["Upgrade"] = []string{protocol}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = nil // no Go default
	}
	back.SetDeadline(time.Now().Add(HandshakeTimeout)) // the handshake, not the socket
	if err := out.Write(back); err != nil {
		return nil, nil, fmt.Errorf("write upgrade request: %w", err)
	}
	br := bufio.NewReaderSize(back, 4<<10)
	res, err := upstream.ReadFinal(br, out.Method, interim)
	if err != nil {
		return nil, nil, fmt.Errorf("read upgrade response: %w", err)
	}
	back.SetDeadline(time.Time{})
	if got := res.Header.Get("Upgrade"); res.Status == http.StatusSwitchingProtocols && !strings.EqualFold(protocol, got) {
		upstream.Release(res)
		return nil, nil, fmt.Errorf("backend switched to protocol %q when %q was requested", got, protocol)
	}
	return res, br, nil
}

// Splice copies both ways until either side ends, then closes both. It
// runs one direction on a new goroutine and the other on its own, every
// write under WriteTimeout (invariant 1). It returns the bytes
// written each way: in from the client to back, out from back to the
// client (the early bytes ForwardBuffered wrote not included).
func Splice(client, back net.Conn) (in, out int64) {
	var wg sync.WaitGroup
	wg.Go(func() {
		in, _ = pump(back, readSide(client))
		client.Close()
		back.Close()
	})
	out, _ = pump(client, back)
	if sc, ok := client.(*socketConn); ok {
		sc.sendGoAway()
	}
	client.Close()
	back.Close()
	wg.Wait()
	return in, out
}

// readSide is the connection to read from: the hijacked client connection
// wraps its writes (for the 1001 close) but reads from the raw socket.
func readSide(c net.Conn) net.Conn {
	if sc, ok := c.(*socketConn); ok {
		return sc.Conn
	}
	return c
}

// ForwardBuffered writes what br holds (bytes a side sent early, read
// with a head) to dst within WriteTimeout, before the splice starts.
func ForwardBuffered(dst net.Conn, br *bufio.Reader) error {
	n := br.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := br.Peek(n)
	return writeTimed(dst, b)
}

// writeTimed writes p to an upgraded connection within WriteTimeout
// (a *socketConn sets its own deadline).
func writeTimed(dst net.Conn, p []byte) error {
	if _, ok := dst.(*socketConn); !ok {
		if err := dst.SetWriteDeadline(time.Now().Add(WriteTimeout)); err != nil {
			return fmt.Errorf("set write deadline: %w", err)
		}
	}
	_, err := dst.Write(p)
	return err
}

// pumpBufSize is the buffer a pump borrows while data flows.
const pumpBufSize = 16 << 10

var pumpBufs = sync.Pool{New: func() any { return new([pumpBufSize]byte) }}

// pump copies src to dst and returns how many bytes dst took. A plain TCP
// source is read as invariant 3 says; others (TLS) into a small buffer of
// their own. Each write to dst has a deadline of WriteTimeout.
func pump(dst, src net.Conn) (int64, error) {
	var written int64 // bytes dst took
	wait := wire.ReadableWaiter(src)
	var small []byte
	if wait == nil {
		small = make([]byte, 2<<10)
	}
	for {
		buf := small
		var pooled *[pumpBufSize]byte
		if wait != nil {
			if err := wait(); err != nil {
				return written, err
			}
			pooled = pumpBufs.Get().(*[pumpBufSize]byte)
			buf = pooled[:]
		}
		n, err := src.Read(buf)
		if n > 0 {
			if werr := writeTimed(dst, buf[:n]); werr != nil {
				err = werr
			} else {
				written += int64(n)
			}
		}
		if pooled != nil {
			pumpBufs.Put(pooled)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return written, nil
			}
			return written, err
		}
	}
}

// DialTimeout bounds a dial to a sandbox or a fixed upstream.
const DialTimeout = 5 * time.Second

// DialURL connects to the host of an http or https URL (its default port
// if it names none); https speaks TLS with HTTP/1.1 by ALPN, the only
// protocol an upgrade can switch from.
func DialURL(ctx context.Context, d *net.Dialer, u *url.URL) (net.Conn, error) {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	if u.Scheme == "https" {
		td := &tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}}
		return td.DialContext(ctx, "tcp", addr)
	}
	return d.DialContext(ctx, "tcp", addr)
}

// Switch completes a protocol switch on a hijacked client connection:
// it writes the sandbox's 101 (res, released here) by net/http's rules,
// its hop-by-hop Connection and Upgrade included (they are the switch),
// with the gateway's own headers (X-Request-Id and the like) added where
// res has none, then forwards the bytes either side sent early (clientBuf:
// read by the server past the request; backBuf: by the handshake past the
// 101). Then the buffers may go and the pair be spliced. On error the
// caller closes both connections.
func Switch(client net.Conn, clientBuf *bufio.Reader, back net.Conn, backBuf *bufio.Reader, res *upstream.Response, own http.Header, out *http.Request) error {
	for k, v := range own {
		if _, ok := res.Header[k]; !ok {
			res.Header[k] = v
		}
	}
	head := &http.Response{StatusCode: res.Status, ProtoMajor: 1, ProtoMinor: 1, Header: res.Header, Request: out}
	err := head.Write(client)
	upstream.Release(res)
	if err != nil {
		return fmt.Errorf("write protocol switch: %w", err)
	}
	if err := ForwardBuffered(back, clientBuf); err != nil {
		return fmt.Errorf("forward early client bytes: %w", err)
	}
	if err := ForwardBuffered(client, backBuf); err != nil {
		return fmt.Errorf("forward early upstream bytes: %w", err)
	}
	return nil
}
