package wire

import (
	"net"
	"syscall"
)

// ReadableWaiter returns a func that blocks until c has data (or EOF or an
// error) without reading it, so a pump holds no buffer while the socket is
// idle; nil when c is not a plain socket.
func ReadableWaiter(c net.Conn) func() error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var peek [1]byte
	ready := func(fd uintptr) bool {
		// MSG_PEEK leaves the byte for the real read. EAGAIN means nothing
		// yet: returning false parks on the poller until the socket turns
		// readable, exactly as a blocking Read would.
		_, _, err := syscall.Recvfrom(int(fd), peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return err != syscall.EAGAIN && err != syscall.EINTR
	}
	return func() error { return raw.Read(ready) }
}

// IdleReadable reports whether an idle connection has data or EOF waiting
// (or is broken): such a connection must not carry another request
// (connPool invariant 4). It peeks without blocking and consumes nothing.
func IdleReadable(c net.Conn) bool {
	if r, ok := c.(*rawConn); ok {
		return r.idleReadable()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return idleReadableByDeadline(c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	readable := true
	var peek [1]byte
	cerr := raw.Control(func(fd uintptr) {
		for {
			_, _, err := syscall.Recvfrom(int(fd), peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			readable = err != syscall.EAGAIN
			return
		}
	})
	return readable || cerr != nil
}

// idleReadable is IdleReadable's peek on the socket handle r keeps: the
// same MSG_PEEK system call, without the net.rawConn and the closure a
// SyscallConn().Control call allocates on every pool Get. r.rmu orders
// it with Read (an idle connection has no reader; the lock costs nothing).
func (r *rawConn) idleReadable() bool {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	r.peekReadable = true
	if err := r.rc.Control(r.peekF); err != nil {
		return true
	}
	return r.peekReadable
}

// peek is idleReadable's Control func, bound once at NewRawConn.
func (r *rawConn) peek(fd uintptr) {
	for {
		_, _, err := syscall.Recvfrom(int(fd), r.peekB[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err == syscall.EINTR {
			continue
		}
		r.peekReadable = err != syscall.EAGAIN
		return
	}
}
