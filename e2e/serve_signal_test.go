//go:build unix

package e2e

import (
	"net"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSighupDuringStartup: a SIGHUP while the gateway is still starting
// (here: waiting on a Docker engine that does not answer) does not end
// it; it is taken once the config is watched. Its default action would
// end the process, and systemd does not restart a process SIGHUP ended:
// `systemctl reload` during a slow start left no gateway.
func TestSighupDuringStartup(t *testing.T) {
	bin := buildBinary(t)
	// A Docker engine that accepts and never answers, until released.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 1)
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	release := func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}
	defer release()

	t.Setenv("DOCKER_HOST", "tcp://"+ln.Addr().String()) // the child inherits it
	p := startProcIn(t, t.TempDir(), bin, append([]string{"serve", "--http", freePort(t), "--admin", freePort(t)}, labelArgs()...)...)
	select {
	case <-accepted: // starting: the manager asks the engine
	case err := <-p.done:
		t.Fatalf("gateway exited (%v) before asking the engine\n%s", err, p.stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatal("the gateway never asked the engine")
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Time for the signal's default action, where it still applies.
	select {
	case err := <-p.done:
		p.done <- err
		t.Fatalf("SIGHUP during start ended the gateway: %v", err)
	case <-time.After(time.Second):
	}
	release() // the engine fails: the gateway serves anyway (503s until it is back)
	p.waitFor(t, p.stderr, regexp.MustCompile(`previewgate serving`))
	p.waitFor(t, p.stderr, regexp.MustCompile(`SIGHUP`))
}
