package wire

import (
	"io"
	"net"
)

// writeReadRaw is WriteRead on a raw socket; ok false for other
// connections (and under the race detector, see raceBuild).
func writeReadRaw(c net.Conn, p, b []byte) (n int, err error, ok bool) {
	r, ok := c.(*rawConn)
	if !ok || raceBuild || len(p) == 0 || len(b) == 0 {
		return 0, nil, false
	}
	n, err = r.writeRead(p, b)
	return n, err, true
}

// writeRead is WriteRead on a raw socket: one poller read (rc.Read arms
// readiness first, internal/poll's prepareRead) whose first call writes p
// and waits instead of reading.
func (r *rawConn) writeRead(p, b []byte) (int, error) {
	r.rmu.Lock()
	r.rbuf, r.rn, r.rerr = b, 0, nil
	r.fwbuf, r.fwerr, r.fwdone = p, nil, false
	err := r.rc.Read(r.writeReadF)
	short := r.fwbuf // not taken at once, or never tried (err)
	werr, done := r.fwerr, r.fwdone
	r.rbuf, r.fwbuf = nil, nil
	n, rerr := r.rn, r.rerr
	r.rmu.Unlock()
	if werr != nil || (!done && err != nil) {
		if werr == nil {
			werr = err // the read's deadline or a closed socket, before the write
		}
		return 0, &net.OpError{Op: "write", Net: "tcp", Source: r.LocalAddr(), Addr: r.RemoteAddr(), Err: werr}
	}
	if !done {
		// The socket took part of p (or none): the rest goes as Write
		// sends it, bounded by the write deadline; then a plain Read.
		if _, err := r.Write(short); err != nil {
			return 0, err
		}
		return r.Read(b)
	}
	if err == nil {
		err = rerr
	}
	if err != nil && err != io.EOF {
		err = &net.OpError{Op: "read", Net: "tcp", Source: r.LocalAddr(), Addr: r.RemoteAddr(), Err: err}
	}
	return n, err
}

// writeReadStep is writeRead's poller func, bound once at NewRawConn.
// Its first call writes (under wmu, so that it never interleaves with a
// Write) and returns false to wait for the answer; a write the socket
// does not take whole ends the read at once for writeRead to finish.
// Later calls read. r.rmu is held.
func (r *rawConn) writeReadStep(fd uintptr) bool {
	if r.fwdone {
		return r.read(fd)
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.explicitW.Load() != 0 {
		return true // an explicit write deadline is set: Write honours it
	}
	r.wbuf, r.wn, r.werr = r.fwbuf, 0, nil
	whole := r.write(fd)
	r.fwbuf, r.fwerr = r.wbuf, r.werr
	r.wbuf = nil
	if !whole || r.fwerr != nil {
		return true
	}
	r.fwdone = true
	return false
}
