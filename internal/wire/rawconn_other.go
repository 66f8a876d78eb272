//go:build !linux

package wire

import (
	"net"
	"time"
)

// NewRawConn is the identity where raw socket calls are not implemented
// (writes are not bounded there).
func NewRawConn(c net.Conn, _ time.Duration) net.Conn { return c }
