package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestSlowloris runs the real server from NewServer: a client that sends
// its headers one byte at a time is cut at ReadHeaderTimeout while other
// clients keep being served.
func TestSlowloris(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Limits.ReadHeaderTimeout = config.Duration(time.Second)
	app := echoApp(t)
	g, err := New(cfg, fakes(&fakeSandboxes{addrs: []string{app.Listener.Addr().String()}}), Options{}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cfg, g, testkit.Logger(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); g.Close() })
	tok := testkit.Mint(t, cfg, "abc", time.Hour)

	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	cut := make(chan string, 1)
	go func() {
		br := bufio.NewReader(slow)
		line, err := br.ReadString('\n')
		if err == nil {
			// Whatever the server answered, it must also hang up.
			if _, err = io.Copy(io.Discard, br); err == nil {
				err = io.EOF // closed by the server
			}
		}
		cut <- fmt.Sprintf("%q, then %v", line, err)
	}()

	// A normal client keeps getting answers while the slow one dribbles.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var served, failed atomic.Int32
	wg.Go(func() {
		c := &http.Client{Timeout: 10 * time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			req := abcRequest("GET", "http://"+ln.Addr().String()+"/", nil, tok)
			resp, err := c.Do(req)
			if err != nil || resp.StatusCode != 200 {
				failed.Add(1)
			} else {
				served.Add(1)
			}
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	// The header never ends: "GET / ...\r\nX-Pad: aaaa..." one byte per 200ms.
	// The server must cut us long before 100 bytes (20s).
	msg := "GET / HTTP/1.1\r\nHost: sandbox-abc." + testDomain + "\r\nX-Pad: " + strings.Repeat("a", 100)
	var result string
	sent := 0
dribble:
	for sent < len(msg) {
		select {
		case result = <-cut:
			break dribble
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := slow.Write([]byte{msg[sent]}); err != nil {
			result = "write: " + err.Error()
			break
		}
		sent++
	}
	close(stop)
	wg.Wait()
	if result == "" {
		t.Fatalf("slow client sent all %d bytes without being cut", sent)
	}
	if strings.Contains(result, "HTTP/1.1 2") {
		t.Fatalf("slow client got a success: %s", result)
	}
	t.Logf("slow client cut after %d bytes: %s; meanwhile %d served, %d failed", sent, result, served.Load(), failed.Load())
	if served.Load() == 0 || failed.Load() != 0 {
		t.Fatalf("normal client: %d served, %d failed while the slow one was connected; want all served",
			served.Load(), failed.Load())
	}
}
