package wire

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// rawConn reads and writes a TCP socket with raw system calls (#9). The
// socket is non-blocking, so a read or write returns at once (EAGAIN
// means: wait on the poller, as net does). What it saves is the runtime's
// bookkeeping around every system call: on loopback a write runs the
// receiver's TCP processing too and takes long enough that the runtime's
// monitor thread hands the goroutine's processor to another thread, wakes
// that thread, and keeps itself polling every 20 µs. In the 1 KiB profile
// that was a tenth of the gateway's CPU; nginx pays nothing of the kind.
//
// It also bounds every write (#13): a write that cannot hand its bytes to
// the kernel within its writeTimeout fails, so a peer that stopped reading (a
// client, or a sandbox never reading a request body) holds a goroutine
// and a descriptor for writeTimeout at most. A deadline set explicitly
// (SetDeadline, SetWriteDeadline: cancellation, the WebSocket pumps)
// takes precedence while it is set.
type rawConn struct {
	*net.TCPConn
	rc syscall.RawConn

	wto       time.Duration // writeTimeout; zero: writes are not bounded
	explicitW atomic.Int64  // unix nanos of the explicit write deadline; 0: none
	autoW     atomic.Int64  // unix nanos of the write deadline Write last set; 0: none in force

	rmu   sync.Mutex // guards the read state: Read may be called concurrently
	rbuf  []byte
	rn    int
	rerr  error
	readF func(fd uintptr) bool

	// idleReadable's state, under rmu (readable_linux.go).
	peekB        [1]byte
	peekReadable bool
	peekF        func(fd uintptr)

	wmu    sync.Mutex // guards the write state
	wbuf   []byte
	wn     int
	werr   error
	writeF func(fd uintptr) bool
}

// NewRawConn wraps c when it is a TCP socket, with writes bounded by
// writeTimeout (zero: unbounded); otherwise it returns c.
func NewRawConn(c net.Conn, writeTimeout time.Duration) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &rawConn{TCPConn: tc, rc: rc, wto: writeTimeout}
	r.readF, r.writeF, r.peekF = r.read, r.write, r.peek // bound once, not per call
	return r
}

func (r *rawConn) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.rbuf[0])), uintptr(len(r.rbuf)))
		switch e {
		case 0:
			r.rn = int(n)
			if n == 0 {
				r.rerr = io.EOF
			}
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.rerr = os.NewSyscallError("read", e)
		return true
	}
}

func (r *rawConn) Read(p []byte) (int, error) {
	if raceBuild {
		return r.TCPConn.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	r.rmu.Lock()
	defer r.rmu.Unlock()
	r.rbuf, r.rn, r.rerr = p, 0, nil
	err := r.rc.Read(r.readF)
	r.rbuf = nil
	if err == nil {
		err = r.rerr
	}
	if err != nil && err != io.EOF {
		err = &net.OpError{Op: "read", Net: "tcp", Source: r.LocalAddr(), Addr: r.RemoteAddr(), Err: err}
	}
	return r.rn, err
}

func (r *rawConn) write(fd uintptr) bool {
	for len(r.wbuf) > 0 {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&r.wbuf[0])), uintptr(len(r.wbuf)))
		switch e {
		case 0:
			r.wn += int(n)
			r.wbuf = r.wbuf[n:]
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // the poller waits for room, then calls again
		}
		r.werr = os.NewSyscallError("write", e)
		return true
	}
	return true
}

// armWriteLocked moves the write deadline to r.wto from now when no
// explicit deadline is set and the last one drifted by 1/16 of it (a
// deadline move costs a timer update; most writes skip it). r.wmu must
// be held.
func (r *rawConn) armWriteLocked() {
	if r.wto <= 0 || r.explicitW.Load() != 0 {
		return
	}
	now := time.Now()
	if time.Duration(r.autoW.Load()-now.UnixNano()) > r.wto-r.wto/16 {
		return
	}
	due := now.Add(r.wto)
	r.autoW.Store(due.UnixNano())
	r.TCPConn.SetWriteDeadline(due)
	// An explicit deadline set meanwhile (a cancellation) must not be
	// lost under ours: set it again.
	if ns := r.explicitW.Load(); ns != 0 {
		r.TCPConn.SetWriteDeadline(time.Unix(0, ns))
	}
}

// SetWriteDeadline sets an explicit write deadline; the zero time hands
// writes back to writeTimeout.
func (r *rawConn) SetWriteDeadline(t time.Time) error {
	r.explicitW.Store(explicitNanos(t))
	r.autoW.Store(0) // ours is overwritten: the next write arms again
	return r.TCPConn.SetWriteDeadline(t)
}

// SetDeadline sets explicit read and write deadlines.
func (r *rawConn) SetDeadline(t time.Time) error {
	r.explicitW.Store(explicitNanos(t))
	r.autoW.Store(0)
	return r.TCPConn.SetDeadline(t)
}

func explicitNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixNano(), 1)
}

func (r *rawConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.armWriteLocked()
	if raceBuild {
		return r.TCPConn.Write(p)
	}
	r.wbuf, r.wn, r.werr = p, 0, nil
	err := r.rc.Write(r.writeF)
	r.wbuf = nil
	if err == nil {
		err = r.werr
	}
	if err != nil {
		err = &net.OpError{Op: "write", Net: "tcp", Source: r.LocalAddr(), Addr: r.RemoteAddr(), Err: err}
	}
	return r.wn, err
}
