package demoapp

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestBuildContext(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := BuildContext(exe)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(ctx))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	df := string(files["Dockerfile"])
	if !strings.HasPrefix(df, "FROM scratch\n") || !strings.Contains(df, `ENTRYPOINT ["/previewgate", "demo-app"]`) ||
		!strings.Contains(df, "USER 65534") {
		t.Fatalf("Dockerfile:\n%s", df)
	}
	for _, line := range strings.Split(df, "\n") {
		if src, ok := strings.CutPrefix(line, "COPY "); ok {
			src = strings.Fields(src)[0]
			if len(files[src]) == 0 {
				t.Errorf("%s copies %s, which the context lacks", line, src)
			}
		}
	}
	if len(files["rootfs/previewgate"]) == 0 {
		t.Fatal("the context lacks the binary")
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler(slog.New(slog.DiscardHandler)))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "WebSocket counter") {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if _, msg, err := c.Read(ctx); err != nil || string(msg) != "1" {
		t.Fatalf("got %q (%v), want the counter at 1", msg, err)
	}
}
