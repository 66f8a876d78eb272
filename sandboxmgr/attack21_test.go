package sandboxmgr

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
)

// TestEnsureDeadInstanceNotCachedOnReusedAddress (attack21): a sandbox
// whose container dies while its app is probed (a hostile app exits right
// after start) leaves its address free; Docker gives it to the next
// container at once, and when that one's app answers the probe within the
// 500 ms between liveness checks, the dead sandbox's wake succeeded on
// another sandbox's app: its endpoint is cached there and its users are
// served by the other sandbox (until an event or the re-check notices,
// which for a die seen before the endpoint was cached is the re-check). A
// wake must not hand out an endpoint of an instance that no longer runs.
func TestEnsureDeadInstanceNotCachedOnReusedAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, ps, _ := net.SplitHostPort(l.Addr().String())
	l.Close() // nothing answers on A's address yet
	port, _ := strconv.Atoi(ps)
	tpl := &config.Template{Name: "fake", Image: "fake:latest", Port: port, Ready: config.Ready{Timeout: config.Duration(3 * time.Second)}}
	m, f := newFakeManager(t, Config{Templates: func(string) *config.Template { return tpl }})
	f.put(ContainerName("a"), stateExited, map[string]string{LabelPort: ps, LabelTemplate: "fake"})

	type result struct {
		ep  Endpoint
		err error
	}
	done := make(chan result, 1)
	go func() {
		ep, err := m.Ensure(t.Context(), "a", tpl)
		done <- result{ep, err}
	}()
	for f.state(ContainerName("a")) != stateRunning {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // A's app is being probed
	// A's app exits; the address goes to B, whose app answers at once.
	f.setState(ContainerName("a"), stateRunning, stateExited)
	b, err := net.Listen("tcp", "127.0.0.1:"+ps)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	go func() {
		for {
			c, err := b.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	r := <-done
	if r.err == nil {
		t.Fatalf("Ensure(a) returned endpoint %+v of a container that exited during its probe (its address answered for someone else)", r.ep)
	}
	if ep, ok := m.Cached("a"); ok {
		t.Fatalf("cached endpoint %+v for an exited container", ep)
	}
}
