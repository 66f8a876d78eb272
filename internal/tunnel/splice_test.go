package tunnel

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/internal/upstream"
)

// TestHandshakeProtocol: the request carries the switch's own fields
// whatever the outgoing request held, and a 101 to another protocol than
// asked for is refused; one to the same protocol (any case) or any other
// answer comes back.
func TestHandshakeProtocol(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, answer string
		wantErr      bool
		wantStatus   int
	}{
		{"same protocol", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: WebSocket\r\n\r\n", false, 101},
		{"another protocol", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", true, 0},
		{"no protocol", "HTTP/1.1 101 Switching Protocols\r\n\r\n", true, 0},
		{"refused", "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", false, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gw, app := net.Pipe()
			defer gw.Close()
			head := make(chan string, 1)
			go func() {
				defer app.Close()
				br := bufio.NewReader(app)
				var b strings.Builder
				for {
					line, err := br.ReadString('\n')
					b.WriteString(line)
					if err != nil || line == "\r\n" {
						break
					}
				}
				head <- b.String()
				io.WriteString(app, tc.answer)
			}()
			out, _ := http.NewRequest("GET", "http://app/socket", nil)
			out.Header.Set("Connection", "keep-alive") // the policy's leftovers: replaced
			out.Header.Set("Upgrade", "h2c")
			res, _, err := Handshake(gw, out, "websocket", func(*upstream.Response) {})
			got := <-head
			for _, want := range []string{"Connection: Upgrade\r\n", "Upgrade: websocket\r\n"} {
				if !strings.Contains(got, want) {
					t.Errorf("got request %q, want %q in it", got, want)
				}
			}
			if strings.Contains(got, "User-Agent") || strings.Contains(got, "h2c") || strings.Contains(got, "keep-alive") {
				t.Errorf("got request %q, want no Go User-Agent and only the switch's own fields", got)
			}
			if (err != nil) != tc.wantErr || err == nil && res.Status != tc.wantStatus {
				t.Fatalf("got %v, %v; want error %v, status %d", res, err, tc.wantErr, tc.wantStatus)
			}
			if res != nil {
				upstream.Release(res)
			}
		})
	}
}
