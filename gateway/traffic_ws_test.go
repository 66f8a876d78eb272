package gateway

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/traffic"
)

// TestDockerWebSocketBytesCounted: a WebSocket's bytes after its 101 are
// in its sandbox's counters once it closes (they were not: a dev
// server's hot-reload traffic showed as the upgrade's head only).
func TestDockerWebSocketBytesCounted(t *testing.T) {
	e := newDockerEnv(t, nil)
	id := dockertest.UniqueID("wsbytes")
	wantStatus(t, e.get(id, "/"), 200)
	before, _ := e.traffic.Counters(id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := e.dialWS(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("x"), 16<<10) // under the app's 32 KiB read limit
	const n = 4
	for range n {
		if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
			t.Fatal(err)
		}
		for { // the app echoes it, between its ticks
			typ, got, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if typ == websocket.MessageBinary && len(got) == len(msg) {
				break
			}
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
	want := int64(n * len(msg))
	var after traffic.Counters
	eventually(t, 10*time.Second, "the socket's bytes in the counters", func() bool {
		after, _ = e.traffic.Counters(id)
		return after.BytesIn-before.BytesIn >= want && after.BytesOut-before.BytesOut >= want
	})
	t.Logf("counters: in +%d, out +%d for %d bytes echoed", after.BytesIn-before.BytesIn, after.BytesOut-before.BytesOut, want)
}
