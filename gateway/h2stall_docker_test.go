package gateway

import (
	"net/url"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestDockerHTTP2StalledStreamReleasesSandbox: an HTTP/2 client asks a
// sandbox for 64 KiB and grants the stream no window while it keeps its
// connection open. The gateway resets the stream within write_timeout
// per 4 KiB and ends the exchange, which releases the connection to the
// sandbox and the client's place under the exchange caps (#13). Without
// the write watch the exchange stays open for as long as the client
// likes.
func TestDockerHTTP2StalledStreamReleasesSandbox(t *testing.T) {
	t.Parallel()
	e := newDockerEnv(t, func(c *config.Config) { c.Limits.WriteTimeout = config.Duration(300 * time.Millisecond) })
	id := dockertest.UniqueID("h2stall")
	h2 := e.fronts()[2]
	if code, _, body := e.do(h2, "GET", id, "/echo"); code != 200 {
		t.Fatalf("waking the sandbox: %d %s", code, body)
	}
	u, err := url.Parse(h2.url)
	if err != nil {
		t.Fatal(err)
	}
	c := testkit.DialH2(t, u.Host, 0)
	c.Get(1, "sandbox-"+id+"."+testDomain, "/bytes?n=65536",
		[2]string{"authorization", "Bearer " + testkit.Mint(t, e.cfg, id, time.Minute)})
	testkit.WaitFor(t, "the exchange admitted", func() bool { return e.gw.exchanges.Open() == 1 })
	if got, n := c.StreamEnd(1, 20*time.Second); got != "reset" {
		t.Fatalf("stream %s after %d bytes, want reset", got, n)
	}
	testkit.WaitFor(t, "the exchange released", func() bool { return e.gw.exchanges.Open() == 0 })
}
