package tunnel

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/previewgate/previewgate/internal/upstream"
)

// Registry tracks the client side of upgraded (WebSocket) connections,
// each under a key (the gateway's: a sandbox id), so that they can be
// closed with 1001 (going away) when the gateway drains or the reaper
// stops their sandbox. http.Server.Shutdown does not see hijacked
// connections.
type Registry struct {
	mu    sync.Mutex // guards conns
	conns map[*socketConn]struct{}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{conns: make(map[*socketConn]struct{})} }

// WriteTimeout bounds every write to an upgraded connection, either
// side: a client (or sandbox) that stops reading is cut after this long
// instead of holding the socket pair, its goroutines and its descriptors
// forever (#13). A write is one pump chunk (at most pumpBufSize), so a
// peer must take 16 KiB per 30 s to stay connected.
const WriteTimeout = 30 * time.Second

// goAwayTimeout bounds the 1001 close frame sent when the gateway closes a
// socket; a client that does not take 4 bytes in this time gets none.
const goAwayTimeout = time.Second

// socketConn wraps a hijacked client connection (invariants 1 and 4: no
// lock is held across a Write, and goAway never waits for a writer).
//
// The close frame is sent only between writes, never inside one: when
// goAway finds a write in progress it cuts that write short (a past write
// deadline) and the client gets no close frame; otherwise the splice
// sends it (sendGoAway) after its pumps stopped. The pumps copy bytes, not
// frames, so a close frame between two writes may still land inside a
// frame the backend wrote in pieces; a client sees a protocol error then,
// which ends the socket as surely as a 1001.
type socketConn struct {
	net.Conn
	key    string       // the Registry key
	state  atomic.Int32 // sockOpen, sockWriting, sockGoingAway or sockCut
	cancel func()       // ends the proxying of this connection
	// frame is the close frame goAway owes (sendGoAway); nil: 1001.
	frame atomic.Pointer[[]byte]
}

// socketConn states.
const (
	sockOpen      = iota
	sockWriting   // a Write is in progress
	sockGoingAway // goAway came between writes: a close frame is owed
	sockCut       // goAway cut a write short: no close frame
)

var errGoingAway = errors.New("websocket closed by the gateway")

// Write writes p with a deadline of WriteTimeout. Writes must not be
// concurrent (one pump writes to the client). After goAway it fails with
// errGoingAway.
func (c *socketConn) Write(p []byte) (int, error) {
	// The deadline goes first: goAway's past deadline, set after it saw
	// sockWriting, then always wins over this one.
	if err := c.Conn.SetWriteDeadline(time.Now().Add(WriteTimeout)); err != nil {
		return 0, fmt.Errorf("set write deadline: %w", err)
	}
	if !c.state.CompareAndSwap(sockOpen, sockWriting) {
		return 0, errGoingAway
	}
	n, err := c.Conn.Write(p)
	if !c.state.CompareAndSwap(sockWriting, sockOpen) && err == nil {
		err = errGoingAway // goAway came during the write
	}
	return n, err
}

// closeFrame1001 is an unmasked server-to-client close frame with status
// 1001 (going away).
var closeFrame1001 = []byte{0x88, 0x02, 0x03, 0xe9}

// CloseFrame is an unmasked server-to-client WebSocket close frame with
// status code and reason (RFC 6455 5.5.1), the reason cut to the 123
// bytes a control frame has room for.
func CloseFrame(code uint16, reason string) []byte {
	reason = reason[:min(len(reason), 123)]
	return append([]byte{0x88, byte(2 + len(reason)), byte(code >> 8), byte(code)}, reason...)
}

// goAway stops further writes and cancels the proxying, without waiting
// for anything: a write in progress is cut short at once; otherwise the
// splice sends the close frame (sendGoAway) as it ends: frame, or 1001
// if nil. Of two goAways, the first one's frame is sent.
func (c *socketConn) goAway(frame []byte) {
	if frame != nil {
		c.frame.CompareAndSwap(nil, &frame)
	}
	for {
		switch c.state.Load() {
		case sockOpen:
			if !c.state.CompareAndSwap(sockOpen, sockGoingAway) {
				continue
			}
		case sockWriting:
			if !c.state.CompareAndSwap(sockWriting, sockCut) {
				continue
			}
			c.Conn.SetWriteDeadline(time.Unix(1, 0))
		}
		break
	}
	c.cancel()
}

// sendGoAway writes the close frame goAway owes, if any, within
// goAwayTimeout. The splice calls it once its client pump stopped.
func (c *socketConn) sendGoAway() {
	if c.state.Load() != sockGoingAway {
		return
	}
	frame := closeFrame1001
	if f := c.frame.Load(); f != nil {
		frame = *f
	}
	c.Conn.SetWriteDeadline(time.Now().Add(goAwayTimeout))
	c.Conn.Write(frame)
}

// CloseAll closes every socket under key ("" means all) with 1001 and
// returns how many it closed, at once (invariant 4): a caller holding a
// lock (the reaper's BeforeStop) is never wedged by a client.
func (s *Registry) CloseAll(key string) int {
	s.mu.Lock()
	var list []*socketConn
	for c := range s.conns {
		if key == "" || c.key == key {
			list = append(list, c)
		}
	}
	s.mu.Unlock()
	for _, c := range list {
		c.goAway(nil)
	}
	return len(list)
}

// Count is how many registered sockets are open.
func (s *Registry) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Registry) add(c *socketConn) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
}

func (s *Registry) remove(c *socketConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Writer is the ResponseWriter of an upgrade request: its Hijack
// registers the client connection under its key, wrapped so that every
// write to it has a deadline and the registry can close it.
type Writer struct {
	http.ResponseWriter
	s      *Registry
	key    string
	cancel func()
	// conn is the hijacked connection; GoAway reads it from another
	// goroutine.
	conn atomic.Pointer[socketConn]
}

// Wrap returns w's Writer for a socket under key; cancel ends its
// proxying (CloseAll calls it).
func (s *Registry) Wrap(w http.ResponseWriter, key string, cancel func()) *Writer {
	return &Writer{ResponseWriter: w, s: s, key: key, cancel: cancel}
}

func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	sc := &socketConn{Conn: conn, key: w.key, cancel: w.cancel}
	w.s.add(sc)
	w.conn.Store(sc)
	// The buffered writer must write through the wrapper too.
	brw.Writer.Reset(sc)
	return sc, brw, nil
}

// Take completes the protocol switch res (a 101 that Handshake read from
// back; backBuf holds what came after it) on the client side: it hijacks
// the client connection, writes the 101 with w's headers added (Switch),
// forwards the bytes either side sent early, and lets the server's
// per-connection state go (the ResponseWriter and its buffers; Done still
// works). The returned connection is ready to Splice with back. res is
// released either way. On error the client connection is closed if it
// was hijacked (Hijacked reports it; if not, w can still answer) and back
// is the caller's.
func (w *Writer) Take(back net.Conn, backBuf *bufio.Reader, res *upstream.Response, out *http.Request) (net.Conn, error) {
	client, brw, err := w.Hijack()
	if err != nil {
		upstream.Release(res)
		return nil, fmt.Errorf("hijack for protocol switch: %w", err)
	}
	if err := Switch(client, brw.Reader, back, backBuf, res, w.Header(), out); err != nil {
		client.Close()
		return nil, err
	}
	w.ResponseWriter = nil
	return client, nil
}

// Hijacked reports whether the client connection was taken from the
// server: w can answer no more.
func (w *Writer) Hijacked() bool { return w.conn.Load() != nil }

// Done unregisters the connection when proxying ended.
func (w *Writer) Done() {
	if c := w.conn.Load(); c != nil {
		w.s.remove(c)
	}
}

// GoAway closes w's socket with a close frame of code and reason, as
// CloseAll does with 1001, and returns at once (invariant 4); safe from
// any goroutine. Before the client connection is hijacked it cancels the
// proxying only (the switch then fails and the client gets no 101).
func (w *Writer) GoAway(code uint16, reason string) {
	if c := w.conn.Load(); c != nil {
		c.goAway(CloseFrame(code, reason))
		return
	}
	w.cancel()
}
