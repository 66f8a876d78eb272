package testkit

import (
	"net"
	"sync"
	"testing"
)

// ServeTCP accepts connections on a free loopback port until the test ends
// and returns the port's address. handle runs on each connection in a
// goroutine of its own, and the connection is closed when it returns. When
// the test ends ServeTCP closes the listener and every connection still
// open, then waits for the handlers to return: a handler must end once its
// connection is closed.
func ServeTCP(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln := Listen(t)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex // guards open and closed
		open   = map[net.Conn]struct{}{}
		closed bool
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed { // accepted while the test ended
				mu.Unlock()
				c.Close()
				return
			}
			open[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					c.Close()
					mu.Lock()
					delete(open, c)
					mu.Unlock()
				}()
				handle(c)
			})
		}
	})
	return ln.Addr().String()
}
