package wire

import "net"

// WriteRead writes p in full to c and then reads into b: c.Write(p)
// followed by c.Read(b), with the same results and errors (a failed write
// returns 0 and the write's error; nothing is read). On a connection of
// NewRawConn it makes one system call less (#25): a plain Read first tries
// the socket and, for the answer to bytes just written, can only get
// EAGAIN before it waits on the poller. WriteRead arms the read's
// readiness before it writes, so it waits first and reads once. An answer
// cannot be missed: the poller records every readiness event after the
// arming, and the answer's bytes arrive after the write. A write the
// socket does not take at once ends as Write does (under its deadline),
// then a plain Read follows.
//
// p must be the caller's to keep until WriteRead returns; b is read into
// as by Read (0 < n ≤ len(b) unless an error or EOF).
func WriteRead(c net.Conn, p, b []byte) (int, error) {
	if n, err, ok := writeReadRaw(c, p, b); ok {
		return n, err
	}
	if _, err := c.Write(p); err != nil {
		return 0, err
	}
	return c.Read(b)
}
