package wire

import (
	"context"
	"errors"
	"net"
	"os"
	"time"
)

// IsTimeout reports a deadline that passed: a context's or a socket's.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// idleReadableByDeadline is IdleReadable for connections without a socket
// to peek at: a read with a deadline in the past returns at once, with a
// timeout when nothing is waiting. Any byte it reads is lost, which is fine:
// a connection that had one is closed.
func idleReadableByDeadline(c net.Conn) bool {
	if err := c.SetReadDeadline(time.Unix(1, 0)); err != nil {
		return true
	}
	var b [1]byte
	_, err := c.Read(b[:])
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	return c.SetReadDeadline(time.Time{}) != nil
}
