package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// portApp answers / with which app it is and the Host it saw, and /ws
// with a WebSocket that sends the same once.
func portApp(t *testing.T, name string) (*httptest.Server, int) {
	say := func(r *http.Request) []byte {
		b, _ := json.Marshal(map[string]string{"app": name, "host": r.Host})
		return b
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write(say(r)) })
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", say(r))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.Write(r.Context(), websocket.MessageText, say(r))
		c.Close(websocket.StatusNormalClosure, "")
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	port, _ := strconv.Atoi(p)
	return s, port
}

type portAnswer struct{ App, Host string }

// TestPortHosts: <port>-sandbox-<id> reaches that port of the same
// sandbox (the endpoint's IP, the requested port) with the same token,
// over HTTP on both proxy paths and WebSocket; pooled connections of the
// one instance never carry a request to another port (#22).
func TestPortHosts(t *testing.T) {
	t.Parallel()
	main, mainPort := portApp(t, "main")
	_, otherPort := portApp(t, "other")
	cfg := testConfig()
	cfg.Templates["app"].Port = mainPort
	cfg.Templates["app"].Ports = []int{mainPort, otherPort}
	_, srv := startGateway(t, cfg, &idSandboxes{addrs: map[string]string{"abc": main.Listener.Addr().String()}})
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	plain := "sandbox-abc." + testDomain
	other := fmt.Sprintf("%d-sandbox-abc.%s", otherPort, testDomain)
	mainHost := fmt.Sprintf("%d-sandbox-abc.%s", mainPort, testDomain)
	want := map[string]portAnswer{
		plain:    {"main", fmt.Sprintf("localhost:%d", mainPort)},
		mainHost: {"main", fmt.Sprintf("localhost:%d", mainPort)},
		other:    {"other", fmt.Sprintf("localhost:%d", otherPort)},
	}
	for i := range 12 { // alternating, so pooled connections are reused
		method := "GET"
		if i%2 == 1 {
			method = "POST" // a body, on the same path
		}
		for _, host := range []string{plain, other, mainHost} {
			resp := testkit.Request(t, srv, method, host, "/", tok)
			var got portAnswer
			json.NewDecoder(resp.Body).Decode(&got)
			if resp.StatusCode != 200 || got != want[host] {
				t.Fatalf("%s round %d: %s answered %d %+v, want %+v", method, i, host, resp.StatusCode, got, want[host])
			}
		}
	}
	for _, host := range []string{plain, other} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, _, err := dialSocket(ctx, srv, host, tok)
		if err != nil {
			cancel()
			t.Fatalf("WebSocket to %s: %v", host, err)
		}
		_, b, err := c.Read(ctx)
		c.CloseNow()
		cancel()
		var got portAnswer
		json.Unmarshal(b, &got)
		if err != nil || got != want[host] {
			t.Errorf("WebSocket to %s: got %+v (%v), want %+v", host, got, err, want[host])
		}
	}
}

// TestPortHostStreamsAndLimits: SSE streams on a port host, and a port
// host counts against its sandbox's limits (one WebSocket per sandbox
// here, open on the plain host, refuses one on the port host) (#22).
func TestPortHostStreamsAndLimits(t *testing.T) {
	t.Parallel()
	main, mainPort := portApp(t, "main")
	_, otherPort := portApp(t, "other")
	cfg := testConfig()
	cfg.Templates["app"].Port = mainPort
	cfg.Templates["app"].Ports = []int{mainPort, otherPort}
	cfg.Limits.WebSocketsPerSandbox = 1
	_, srv := startGateway(t, cfg, &idSandboxes{addrs: map[string]string{"abc": main.Listener.Addr().String()}})
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	other := fmt.Sprintf("%d-sandbox-abc.%s", otherPort, testDomain)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/sse", nil)
	req.Host = other
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, _ := resp.Body.Read(buf)
	resp.Body.Close()
	if !strings.Contains(string(buf[:n]), `"app":"other"`) {
		t.Errorf("SSE on %s: got %q, want the other port's first event", other, buf[:n])
	}

	c, _, err := dialSocket(ctx, srv, "sandbox-abc."+testDomain, tok)
	if err != nil {
		t.Fatalf("first WebSocket: %v", err)
	}
	defer c.CloseNow()
	if _, resp, err := dialSocket(ctx, srv, other, tok); err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second WebSocket of the sandbox, on its port host: got %v %v, want 429", resp, err)
	}
}

// TestPortHostRefusals: an unlisted port is 404, an id too long for the
// label <port>-sandbox-<id> is 400 with the rule, a malformed port 400, a
// token for another sandbox 403, and a port host of an existing sandbox
// whose own template does not list the port 404 (#22).
func TestPortHostRefusals(t *testing.T) {
	t.Parallel()
	app, port := portApp(t, "main")
	cfg := testConfig()
	cfg.Templates["app"].Port = port
	cfg.Templates["app"].Ports = []int{port, 8000}
	_, srv := startGateway(t, cfg, &idSandboxes{addrs: map[string]string{"": app.Listener.Addr().String()}})
	long := strings.Repeat("a", config.PortIDMax(8000)+1)
	for _, tc := range []struct {
		name, host, tokFor string
		status             int
		code               string
	}{
		{"unlisted port", "9999-sandbox-abc." + testDomain, "abc", 404, "unknown_port"},
		{"id too long for the label", "8000-sandbox-" + long + "." + testDomain, long, 400, "id_too_long_for_port"},
		{"the same id without a port", "sandbox-" + long + "." + testDomain, long, 200, ""},
		{"port 0", "0-sandbox-abc." + testDomain, "abc", 400, "bad_port"},
		{"leading zero", "08000-sandbox-abc." + testDomain, "abc", 400, "bad_port"},
		{"digits without sandbox", "8000-abc." + testDomain, "abc", 404, "unknown_host"},
		{"token for another sandbox", "8000-sandbox-abc." + testDomain, "xyz", 403, "forbidden"},
		{"no token", "8000-sandbox-abc." + testDomain, "", 401, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := ""
			if tc.tokFor != "" {
				tok = testkit.Mint(t, cfg, tc.tokFor, time.Minute)
			}
			resp := testkit.Request(t, srv, "GET", tc.host, "/", tok)
			body, _ := io.ReadAll(resp.Body)
			var e struct{ Code string }
			json.Unmarshal(body, &e)
			if resp.StatusCode != tc.status || e.Code != tc.code {
				t.Errorf("%s: got %d %s, want %d %q", tc.host, resp.StatusCode, body, tc.status, tc.code)
			}
		})
	}
}

// TestPortHostTokenExchange: ?access_token= on a port host is exchanged
// for that host's own cookie, which then opens it (#22).
func TestPortHostTokenExchange(t *testing.T) {
	t.Parallel()
	main, mainPort := portApp(t, "main")
	_, otherPort := portApp(t, "other")
	cfg := testConfig()
	cfg.Templates["app"].Port = mainPort
	cfg.Templates["app"].Ports = []int{mainPort, otherPort}
	_, srv := startGateway(t, cfg, &idSandboxes{addrs: map[string]string{"abc": main.Listener.Addr().String()}})
	host := fmt.Sprintf("%d-sandbox-abc.%s", otherPort, testDomain)
	tok := testkit.Mint(t, cfg, "abc", time.Minute)
	resp := testkit.Request(t, srv, "GET", host, "/page?x=1&access_token="+tok, "", "Accept", "text/html")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/page?x=1" && resp.Header.Get("Location") != "http://"+host+"/page?x=1" {
		t.Fatalf("got %d Location %q, want 303 to the clean URL", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Domain != "" {
		t.Fatalf("got cookies %v, want one host-only cookie", cookies)
	}
	resp = testkit.Request(t, srv, "GET", host, "/page?x=1", "", "Cookie", cookies[0].Name+"="+cookies[0].Value)
	var got portAnswer
	json.NewDecoder(resp.Body).Decode(&got)
	if resp.StatusCode != 200 || got.App != "other" {
		t.Errorf("with the cookie: got %d %+v, want 200 from the other port", resp.StatusCode, got)
	}
}
