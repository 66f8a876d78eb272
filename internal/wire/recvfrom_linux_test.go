package wire

import "syscall"

var errAgain error = syscall.EAGAIN

func recvfrom(fd uintptr, b []byte) (int, syscall.Sockaddr, error) {
	return syscall.Recvfrom(int(fd), b, syscall.MSG_DONTWAIT)
}
