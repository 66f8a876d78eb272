//go:build !linux

package wire

import "net"

// ReadableWaiter is Linux-only; elsewhere pumps read into a small buffer.
func ReadableWaiter(net.Conn) func() error { return nil }

// IdleReadable: see readable_linux.go.
func IdleReadable(c net.Conn) bool { return idleReadableByDeadline(c) }
