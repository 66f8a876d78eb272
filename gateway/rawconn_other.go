//go:build !linux

package gateway

import "net"

// newRawConn is the identity where raw socket calls are not implemented.
func newRawConn(c net.Conn) net.Conn { return c }
