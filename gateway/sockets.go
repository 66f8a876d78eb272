package gateway

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
)

// sockets tracks the client side of upgraded (WebSocket) connections so the
// gateway can close them with 1001 (going away) when it drains or when the
// reaper stops their sandbox. http.Server.Shutdown does not see hijacked
// connections.
type sockets struct {
	mu    sync.Mutex // guards conns
	conns map[*socketConn]struct{}
}

func newSockets() *sockets { return &sockets{conns: make(map[*socketConn]struct{})} }

// socketConn wraps a hijacked client connection. Writes are serialized with
// goAway so the close frame never lands inside another Write.
type socketConn struct {
	net.Conn
	sandbox string
	wmu     sync.Mutex // guards writes and closed
	closed  bool
	cancel  func() // ends the proxying of this connection
}

var errGoingAway = errors.New("websocket closed by the gateway")

func (c *socketConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return 0, errGoingAway
	}
	return c.Conn.Write(p)
}

// closeFrame1001 is an unmasked server-to-client close frame with status
// 1001 (going away).
var closeFrame1001 = []byte{0x88, 0x02, 0x03, 0xe9}

// goAway sends the close frame, stops further writes and cancels the proxying.
func (c *socketConn) goAway() {
	c.wmu.Lock()
	if !c.closed {
		c.closed = true
		c.Conn.Write(closeFrame1001)
	}
	c.wmu.Unlock()
	c.cancel()
}

// closeAll sends 1001 to every socket of sandbox ("" means all).
func (s *sockets) closeAll(sandbox string) int {
	s.mu.Lock()
	var list []*socketConn
	for c := range s.conns {
		if sandbox == "" || c.sandbox == sandbox {
			list = append(list, c)
		}
	}
	s.mu.Unlock()
	for _, c := range list {
		c.goAway()
	}
	return len(list)
}

func (s *sockets) add(c *socketConn) {
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
}

func (s *sockets) remove(c *socketConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// upgradeWriter captures the hijacked connection of an upgrade request.
type upgradeWriter struct {
	http.ResponseWriter
	s       *sockets
	sandbox string
	cancel  func()
	conn    *socketConn
}

func (w *upgradeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *upgradeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &socketConn{Conn: conn, sandbox: w.sandbox, cancel: w.cancel}
	w.s.add(w.conn)
	// The buffered writer must write through the wrapper too.
	brw.Writer.Reset(w.conn)
	return w.conn, brw, nil
}

// done unregisters the connection when proxying ended.
func (w *upgradeWriter) done() {
	if w.conn != nil {
		w.s.remove(w.conn)
	}
}

// CloseSockets closes the WebSockets proxied to sandbox id with 1001 (going
// away), e.g. before the reaper stops it. It returns how many it closed.
func (g *Gateway) CloseSockets(id string) int { return g.sockets.closeAll(id) }
