//go:build !linux

package wire

import "net"

func writeReadRaw(net.Conn, []byte, []byte) (int, error, bool) { return 0, nil, false }
