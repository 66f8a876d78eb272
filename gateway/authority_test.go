package gateway

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestHTTP2AuthorityValidated: an HTTP/2 client sends a raw :authority
// that net/http's HTTP/1.1 Host checks would never let through (a Kelvin
// sign that lower-cases to "k", a control byte). The gateway answers 400
// and routes nothing (#13). Go's own client would punycode the name, so
// the request is framed by hand.
func TestHTTP2AuthorityValidated(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	sb := &fakeSandboxes{addrs: []string{echoApp(t).Listener.Addr().String()}}
	g, err := New(cfg, fakes(sb), Options{TLS: true}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	s := NewServer(cfg, g, testkit.Logger(t))
	s.TLSConfig = testkit.TLSConfig("h2")
	srv := serve(t, s)
	tok := testkit.Mint(t, cfg, "*", time.Minute)
	for _, tc := range []struct {
		authority string
		want      int
	}{
		{"sandbox-kab." + testDomain, 200},
		{"sandbox-\u212aab." + testDomain, 400},
		{"sandbox-kab\x7f." + testDomain, 400},
	} {
		if got := rawH2Status(t, srv.Listener.Addr().String(), tc.authority, tok); got != tc.want && (got != 0 || tc.want == 200) {
			t.Errorf(":authority %q: got %d, want %d", tc.authority, got, tc.want)
		}
	}
	if n := sb.ensures.Load(); n != 1 {
		t.Errorf("got %d Ensure calls, want 1 (the valid host only)", n)
	}
}

// rawH2Status sends one GET with the given :authority over a fresh HTTP/2
// connection and returns the response status, or 0 when the server reset
// the stream (the HTTP/2 server's own refusal).
func rawH2Status(t *testing.T, addr, authority, tok string) int {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", authority},
		{":path", "/"}, {"authorization", "Bearer " + tok}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("read frame: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			status, _ := strconv.Atoi(f.PseudoValue("status"))
			return status
		case *http2.RSTStreamFrame:
			return 0
		case *http2.GoAwayFrame:
			t.Fatalf("go away: %v", f.ErrCode)
		}
	}
}

// TestHTTP2HostFieldNotForwarded: an HTTP/2 client may send a regular
// "host" field besides :authority. Routing follows :authority; the app
// must see exactly one Host line, the one the host policy chose, never the
// client's field (#24, item 8), on the direct path and through
// ReverseProxy, with the Host preserved or rewritten.
func TestHTTP2HostFieldNotForwarded(t *testing.T) {
	t.Parallel()
	heads := make(chan string, 1)
	addr := testkit.ServeTCP(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				head.WriteString(line)
				if line == "\r\n" {
					break
				}
			}
			heads <- head.String()
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	authority := "sandbox-abc." + testDomain
	_, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		name string
		mode string
		want string
	}{
		{"preserve", config.HostPreserve, authority},
		{"rewrite", config.HostRewrite, addr},
		{"local", config.HostLocal, "localhost:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Templates["app"].HostHeader = tc.mode
			g, err := New(cfg, fakes(&fakeSandboxes{addrs: []string{addr}}), Options{TLS: true}, testkit.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			s := NewServer(cfg, g, testkit.Logger(t))
			s.TLSConfig = testkit.TLSConfig("h2")
			c := testkit.DialH2(t, serve(t, s).Listener.Addr().String(), 65535)
			c.Get(1, authority, "/", [2]string{"host", "evil.example"},
				[2]string{"authorization", "Bearer " + testkit.Mint(t, cfg, "abc", time.Minute)})
			if got, n := c.StreamEnd(1, 10*time.Second); got != "end" || n != 2 {
				t.Fatalf("stream %s after %d bytes, want end after 2", got, n)
			}
			var head string
			select {
			case head = <-heads:
			case <-time.After(10 * time.Second):
				t.Fatal("the app got no request")
			}
			var hosts []string
			for _, line := range strings.Split(head, "\r\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "host") {
					hosts = append(hosts, strings.TrimSpace(v))
				}
			}
			if len(hosts) != 1 || hosts[0] != tc.want {
				t.Errorf("got Host lines %q, want exactly [%q]; head:\n%s", hosts, tc.want, head)
			}
		})
	}
}
