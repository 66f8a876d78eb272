package cli

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// removeSandboxesAtEnd removes, when t ends, the containers of these
// sandbox ids that this test process made. Container names are global on
// the engine: a gateway's sandbox left running would be a foreign
// container (409) to the next test's gateway. Register it before starting
// the gateway, so it runs after the gateway is gone.
func removeSandboxesAtEnd(t *testing.T, ids ...string) {
	cli := dockertest.Client(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, id := range ids {
			ctr, err := cli.ContainerInspect(ctx, mgrtest.ContainerOf(ctx, cli, id))
			if err != nil || ctr.Config == nil || ctr.Config.Labels[dockertest.LabelRun] != dockertest.RunID() {
				continue // none, or not ours
			}
			if err := cli.ContainerRemove(ctx, ctr.ID, container.RemoveOptions{Force: true}); err != nil {
				t.Errorf("remove sandbox %s: %v", id, err)
			}
		}
	})
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader
// test.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
