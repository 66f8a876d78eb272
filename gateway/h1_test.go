package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
)

// leanAll is a handler whose every plain request may take the lean loop.
type leanAll struct{ http.Handler }

func (leanAll) leanRequest(*http.Request, *leanHint) bool { return true }

var _ leanHandler = leanAll{}

// responses are the handler behaviours the lean writer must frame exactly
// as net/http does.
func responses() http.Handler {
	mux := http.NewServeMux()
	big := strings.Repeat("0123456789abcdef", 640) // 10 KiB
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })
	mux.HandleFunc("/cl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "0123456789")
	})
	mux.HandleFunc("/cl-big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(2*len(big)+100))
		io.WriteString(w, big[:100])
		io.WriteString(w, big) // larger than what is left of the buffer
		io.WriteString(w, big)
	})
	mux.HandleFunc("/cl-short", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "01234")
	})
	mux.HandleFunc("/cl-long", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		if _, err := io.WriteString(w, "0123456789"); err != http.ErrContentLength {
			panic("want ErrContentLength")
		}
		io.WriteString(w, "012")
	})
	mux.HandleFunc("/cl-invalid", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "ten")
		io.WriteString(w, "0123456789")
	})
	mux.HandleFunc("/flush", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a")
		http.NewResponseController(w).Flush()
		io.WriteString(w, "b")
	})
	mux.HandleFunc("/flush-empty", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(202)
		w.(http.Flusher).Flush()
	})
	mux.HandleFunc("/trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum, X-Count")
		io.WriteString(w, "body")
		w.Header().Set("X-Sum", "42")
		w.Header().Set("X-Count", "1")
	})
	mux.HandleFunc("/trailer-prefix", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "body")
		w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
	})
	mux.HandleFunc("/204", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(204)
		if _, err := io.WriteString(w, "nope"); err != http.ErrBodyNotAllowed {
			panic("want ErrBodyNotAllowed")
		}
	})
	mux.HandleFunc("/304", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		w.Header().Set("Content-Length", "100")
		w.Header().Set("Etag", `"v1"`)
		w.WriteHeader(304)
	})
	mux.HandleFunc("/103", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</app.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "after hints")
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["X-Split"] = []string{"a\r\nb", " padded\t"}
		h["Bad Name"] = []string{"dropped"}
		h.Add("Set-Cookie", "a=1")
		h.Add("Set-Cookie", "b=2")
		h.Set("Content-Encoding", "gzip") // no sniffing then
		io.WriteString(w, "not really gzip")
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"a":1}`) })
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<!doctype html><p>hi")
	})
	mux.HandleFunc("/close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	mux.HandleFunc("/500", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", 500)
	})
	mux.HandleFunc("/999", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(599) })
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s host=%s uri=%s close=%v tls=%v cl=%d", r.Method, r.URL.Path, r.URL.RawQuery,
			r.Host, r.RequestURI, r.Close, r.TLS != nil, r.ContentLength)
		for _, k := range []string{"Accept", "Cookie", "X-Multi", "Sec-Ch-Ua", "Host"} {
			fmt.Fprintf(w, " %s=%q", k, r.Header[k])
		}
	})
	return mux
}

// exchange is what a client observes of one response.
type exchange struct {
	Status   int
	Header   http.Header
	CL       int64
	TE       []string
	Body     string
	Trailer  http.Header
	Err      string
	Reusable bool // the connection answers a next request
}

// roundTrip writes raw on a new connection to addr and reads the response,
// then checks whether the connection still serves a second request.
func roundTrip(t *testing.T, addr, raw string, head bool) exchange {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method := "GET"
	if head {
		method = "HEAD"
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return exchange{Err: "read response: " + err.Error()}
	}
	body, err := io.ReadAll(resp.Body)
	ex := exchange{Status: resp.StatusCode, Header: resp.Header, CL: resp.ContentLength, TE: resp.TransferEncoding,
		Body: string(body), Trailer: resp.Trailer}
	ex.Header.Del("Date") // differs when the two exchanges straddle a second
	if err != nil {
		ex.Err = "read body: " + err.Error()
		return ex
	}
	if _, err := io.WriteString(c, "GET /small HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil {
		if r2, err := http.ReadResponse(br, nil); err == nil {
			b, _ := io.ReadAll(r2.Body)
			ex.Reusable = string(b) == "hello"
		}
	}
	return ex
}

// TestLeanMatchesNetHTTP sends the same raw requests to a lean-loop server
// and a net/http-only server running the same handler, and wants the same
// status, headers, framing, body, trailers and connection reuse.
func TestLeanMatchesNetHTTP(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	lean := NewServer(cfg, leanAll{responses()}, testLogger(t))
	std := NewServer(cfg, responses(), testLogger(t))
	leanAddr := serve(t, lean).Listener.Addr().String()
	stdAddr := serve(t, std).Listener.Addr().String()
	get := func(path string, extra ...string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: sandbox-abc.preview.test\r\n" + strings.Join(extra, "") + "\r\n"
	}
	cases := []struct {
		name, raw string
		head      bool
	}{
		{"small", get("/small"), false},
		{"empty", get("/empty"), false},
		{"big chunked", get("/big"), false},
		{"content-length", get("/cl"), false},
		{"content-length short", get("/cl-short"), false},
		{"content-length large writes", get("/cl-big"), false},
		{"head content-length large writes", "HEAD /cl-big HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"content-length long", get("/cl-long"), false},
		{"content-length invalid", get("/cl-invalid"), false},
		{"flush", get("/flush"), false},
		{"flush without body", get("/flush-empty"), false},
		{"trailer", get("/trailer"), false},
		{"trailer prefix", get("/trailer-prefix"), false},
		{"204", get("/204"), false},
		{"304", get("/304"), false},
		{"early hints", get("/103"), false},
		{"header sanitizing", get("/headers"), false},
		{"sniff json", get("/json"), false},
		{"sniff html", get("/html"), false},
		{"handler closes", get("/close"), false},
		{"client closes", get("/small", "Connection: close\r\n"), false},
		{"keep-alive token", get("/small", "Connection: keep-alive\r\n"), false},
		{"error", get("/500"), false},
		{"unknown status", get("/999"), false},
		{"not found", get("/nope"), false},
		{"head small", "HEAD /small HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"head big", "HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"head content-length", "HEAD /cl HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"options", "OPTIONS /small HTTP/1.1\r\nHost: x\r\n\r\n", false},
		{"echo", get("/echo?q=1&r=%20", "accept: text/css\r\nCookie: a=1; b=2\r\nX-Multi: 1\r\nX-Multi:  2 \r\n",
			"sec-ch-ua: \"x\"\r\n"), false},
		{"echo escaped path", get("/echo/a%2Fb/../c"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := lean.leanN.Load()
			l := roundTrip(t, leanAddr, tc.raw, tc.head)
			if lean.leanN.Load() == before {
				t.Fatalf("the lean server did not serve %q on its lean loop", tc.raw)
			}
			s := roundTrip(t, stdAddr, tc.raw, tc.head)
			if !reflect.DeepEqual(l, s) {
				t.Errorf("lean loop and net/http differ:\nlean     %+v\nnet/http %+v", l, s)
			}
		})
	}
}

// TestLeanPanics: a handler aborting mid-body cuts the connection, as
// net/http does, and the server keeps serving.
func TestLeanPanics(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 4096))
		w.(http.Flusher).Flush()
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		panic("handler bug")
	})
	srv := serve(t, NewServer(testConfig(), leanAll{h}, testLogger(t)))
	for _, path := range []string{"/abort", "/bug"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Errorf("%s: body read completely, want a cut connection", path)
		}
		resp.Body.Close()
	}
}

// TestServerHandsOver: whatever the lean loop does not serve reaches
// net/http intact, with the bytes already read, on the same connection.
// Streams are not the lean loop's: the gateway leaves SSE and its own
// status endpoint (however its path is spelled) to net/http, which notices
// a client leaving; a plain request to the same running sandbox is lean.
func TestLeanRequestLeavesStreams(t *testing.T) {
	cfg := testConfig()
	g, err := New(cfg, &fakeSandboxes{addrs: []string{"127.0.0.1:1"}}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tok := mintFor(t, cfg, "abc", time.Minute)
	for _, tc := range []struct {
		name, target, accept string
		want                 bool
	}{
		{"plain", "/app.js", "*/*", true},
		{"event stream", "/events", "text/event-stream", false},
		{"status endpoint", "/__previewgate/status", "*/*", false},
		{"status endpoint, escaped slash", "/__previewgate%2Fstatus", "*/*", false},
	} {
		r := httptest.NewRequest("GET", "http://sandbox-abc."+testDomain+tc.target, nil)
		r.Header.Set("Accept", tc.accept)
		r.Header.Set("Authorization", "Bearer "+tok)
		if got := g.leanRequest(r, &leanHint{}); got != tc.want {
			t.Errorf("%s: leanRequest = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestServerHandsOver(t *testing.T) {
	t.Parallel()
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s body=%q upgrade=%q", r.Proto, r.Method, r.URL.Path, b, r.Header.Get("Upgrade"))
	})
	s := NewServer(testConfig(), leanAll{echo}, testLogger(t))
	addr := serve(t, s).Listener.Addr().String()
	cases := []struct {
		name, raw, want string
		status          int
	}{
		{"post with body", "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", `HTTP/1.1 POST /p body="abc"`, 200},
		{"chunked body", "PUT /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", `HTTP/1.1 PUT /p body="abc"`, 200},
		{"http/1.0", "GET /old HTTP/1.0\r\nHost: x\r\n\r\n", `HTTP/1.0 GET /old body=""`, 200},
		{"upgrade", "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", `upgrade="websocket"`, 200},
		{"connection option", "GET /c HTTP/1.1\r\nHost: x\r\nConnection: X-Hop\r\nX-Hop: 1\r\n\r\n", `GET /c`, 200},
		{"absolute form", "GET http://x/abs HTTP/1.1\r\nHost: x\r\n\r\n", `GET /abs`, 200},
		{"bare LF", "GET /lf HTTP/1.1\nHost: x\n\n", `GET /lf`, 200},
		{"long head", "GET /long HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 20<<10) + "\r\n\r\n", `GET /long`, 200},
		{"no host", "GET /nohost HTTP/1.1\r\n\r\n", "", 400},
		{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n", "", 400},
		{"obs-fold", "GET /fold HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n", "GET /fold", 200},
		{"junk", "HELLO\r\n\r\n", "", 400},
		{"over max_header_bytes", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 80<<10) + "\r\n\r\n", "", 431},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.leanN.Load()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			// A lean request first, then the one to hand over, pipelined.
			if _, err := io.WriteString(c, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"+tc.raw); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			first, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, first.Body)
			if n := s.leanN.Load() - before; n != 1 {
				t.Errorf("lean loop served %d requests, want 1 (the first)", n)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("second response: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, body, tc.status, tc.want)
			}
		})
	}
}

// TestServerTLS: HTTP/2 clients get net/http's HTTP/2; HTTP/1.1 clients
// get the lean loop, with the TLS state on the request.
func TestServerTLS(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s tls=%v", r.Proto, r.TLS != nil)
	})
	s := NewServer(testConfig(), leanAll{h}, testLogger(t))
	s.TLSConfig = testTLSConfig("h2", "http/1.1")
	srv := serve(t, s)
	for _, tc := range []struct {
		proto string
		h2    bool
		lean  uint64
	}{{"HTTP/2.0", true, 0}, {"HTTP/1.1", false, 2}} {
		before := s.leanN.Load()
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: tc.h2}
		if !tc.h2 {
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		for range 2 {
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := tc.proto + " tls=true"; string(b) != want {
				t.Errorf("got %q, want %q", b, want)
			}
		}
		tr.CloseIdleConnections()
		if n := s.leanN.Load() - before; n != tc.lean {
			t.Errorf("%s: lean loop served %d requests, want %d", tc.proto, n, tc.lean)
		}
	}
}

// TestServerShutdown: idle lean connections close at once; a request in
// flight finishes (with Connection: close) before Shutdown returns.
func TestServerShutdown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "done")
	})
	s := NewServer(testConfig(), leanAll{h}, testLogger(t))
	addr := serve(t, s).Listener.Addr().String()
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	idleBR := bufio.NewReader(idle)
	if resp, err := http.ReadResponse(idleBR, nil); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := idleBR.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection: read %d, %v; want EOF at shutdown", n, err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" || !resp.Close {
		t.Errorf("in-flight request: got %q close=%v, want \"done\" with Connection: close", b, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("listener still accepting after Shutdown")
	}
}

// FuzzLeanParse: the lean parser never panics, and whatever it accepts,
// net/http's parser accepts with the same meaning.
func FuzzLeanParse(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD /a?b=c HTTP/1.1\r\nHost: sandbox-a.preview.test:8080\r\nCookie: a=1\r\nAccept: */*\r\n\r\n",
		"OPTIONS /x HTTP/1.1\r\nhost: x\r\nconnection: keep-alive, close\r\nx-a:\t v \r\n\r\nGET",
		"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1]:80\r\nX: \x80\xff\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	s := NewServer(testConfig(), leanAll{http.NotFoundHandler()}, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &h1conn{s: s, remote: "1.2.3.4:5", ctx: context.Background()}
		n, req, _ := c.parse(b)
		if n < 0 || n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		if req == nil {
			return
		}
		std, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:n])))
		if err != nil {
			t.Fatalf("lean accepted %q, net/http refuses: %v", b[:n], err)
		}
		if req.Method != std.Method || req.Host != std.Host || req.RequestURI != std.RequestURI ||
			req.URL.String() != std.URL.String() || !reflect.DeepEqual(req.Header, std.Header) ||
			req.Close != std.Close || std.ContentLength != 0 || len(std.TransferEncoding) != 0 {
			t.Fatalf("%q parsed differently:\nlean     %s %s %s %v close=%v\nnet/http %s %s %s %v close=%v cl=%d",
				b[:n], req.Method, req.Host, req.URL, req.Header, req.Close,
				std.Method, std.Host, std.URL, std.Header, std.Close, std.ContentLength)
		}
	})
}

// TestLeanIdleTimeout: a keep-alive connection that stays quiet is closed
// after limits.idle_conn_timeout.
func TestLeanIdleTimeout(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Limits.IdleConnTimeout = config.Duration(200 * time.Millisecond)
	s := NewServer(cfg, leanAll{responses()}, testLogger(t))
	c, err := net.Dial("tcp", serve(t, s).Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for range 3 { // each request moves the deadline on
		io.WriteString(c, "GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		time.Sleep(50 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read %d, %v; want EOF once idle", n, err)
	}
}

// TestLeanClientLeaves: a lean request that runs long notices its client
// closing the connection, as net/http's requests do: its context ends.
// Over TLS the client's close sends a close_notify record before the FIN.
func TestLeanClientLeaves(t *testing.T) {
	t.Parallel()
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			t.Parallel()
			cancelled := make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
					close(cancelled)
				case <-time.After(time.Minute):
				}
			})
			s := NewServer(testConfig(), leanAll{h}, testLogger(t))
			if useTLS {
				s.TLSConfig = testTLSConfig()
			}
			addr := serve(t, s).Listener.Addr().String()
			var c net.Conn
			var err error
			if useTLS {
				c, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
			} else {
				c, err = net.Dial("tcp", addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
			time.Sleep(100 * time.Millisecond)
			c.Close()
			select {
			case <-cancelled:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler's context did not end after its client left")
			}
			if s.leanN.Load() != 1 {
				t.Fatal("the request did not take the lean loop")
			}
		})
	}
}

// TestLeanSlowRequestKeepsConnection: watching a slow request's client
// does not disturb the connection: a request pipelined meanwhile (read by
// the watcher) is served next, in order.
func TestLeanSlowRequestKeepsConnection(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(3 * watchAfter)
		}
		io.WriteString(w, r.URL.Path)
	})
	s := NewServer(testConfig(), leanAll{h}, testLogger(t))
	c, err := net.Dial("tcp", serve(t, s).Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(2 * watchAfter) // the watcher runs by now
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	for _, path := range []string{"/slow", "/next"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != path {
			t.Fatalf("got %q, want %q", b, path)
		}
	}
	if n := s.leanN.Load(); n != 2 {
		t.Fatalf("lean loop served %d requests, want 2", n)
	}
}

// testTLSConfig serves httptest's self-signed certificate with the given
// ALPN protocols.
func testTLSConfig(protos ...string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{testCert}, NextProtos: protos}
}

var testCert = func() tls.Certificate {
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	defer ts.Close()
	return ts.TLS.Certificates[0]
}()
