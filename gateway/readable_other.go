//go:build !linux

package gateway

import "net"

// readableWaiter is Linux-only; elsewhere pumps read into a small buffer.
func readableWaiter(net.Conn) func() error { return nil }
