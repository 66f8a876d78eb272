package h1server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// leanAll is a handler whose every plain request may take the lean loop.
type leanAll struct{ http.Handler }

// NewServer is New with the lean loop on for a leanAll handler.
func NewServer(cfg *config.Config, h http.Handler, log *slog.Logger) *Server {
	s := New(optionsOf(cfg), h, log)
	if _, ok := h.(leanAll); ok {
		s.Lean = func(*http.Request) bool { return true }
	}
	return s
}

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
	lean := NewServer(cfg, leanAll{responses()}, testkit.Logger(t))
	std := NewServer(cfg, responses(), testkit.Logger(t))
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
	srv := serve(t, NewServer(testConfig(), leanAll{h}, testkit.Logger(t)))
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

// TestIndexCRLF: indexCRLF answers as checking each byte in turn does
// (the loop it replaced), on every string of up to 8 bytes over the
// bytes that matter.
func TestIndexCRLF(t *testing.T) {
	byteLoop := func(b []byte) int {
		for i := 0; i+1 < len(b); i++ {
			if b[i] == '\n' {
				return -1
			}
			if b[i] == '\r' {
				if b[i+1] == '\n' {
					return i
				}
				return -1
			}
		}
		return -1
	}
	alphabet := []byte("a\r\n")
	var gen func(b []byte)
	gen = func(b []byte) {
		if got, want := indexCRLF(b), byteLoop(b); got != want {
			t.Fatalf("indexCRLF(%q) = %d, want %d", b, got, want)
		}
		if len(b) == 8 {
			return
		}
		for _, ch := range alphabet {
			gen(append(b, ch))
		}
	}
	gen(nil)
}

// fieldValue trims and unfolds as strings.ContainsAny, Replace and Trim
// did before #25 made it cheaper: every value from a set of edge cases
// and from every byte at each end gives the same result.
func TestFieldValueAsBefore(t *testing.T) {
	before := func(v string) string {
		if strings.ContainsAny(v, "\r\n") {
			v = newlineToSpace.Replace(v)
		}
		return strings.Trim(v, " \t\r\n")
	}
	cases := []string{"", " ", "\t\r\n", "a", " a ", "\ta b\t", "a\r\nb", "\r\na\r\n", "x\ny", " \x00 ", "é\t", "a\x7f"}
	for c := 0; c < 256; c++ {
		b := string([]byte{byte(c)})
		cases = append(cases, b+"v"+b, " "+b+"\t")
	}
	for _, v := range cases {
		if got, want := fieldValue(v), before(v); got != want {
			t.Errorf("fieldValue(%q) = %q, want %q", v, got, want)
		}
	}
}

// ctlFree answers as the byte loop it replaced for every byte value at
// every place of a word and across word boundaries, and for random runs
// of the bytes around the boundaries the word tests draw (0x1f, 0x20,
// 0x7e-0x80, 0x9f, 0xa0, HTAB).
func TestCtlFree(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		if got, want := ctlFree(b), ctlFreeBytes(b); got != want {
			t.Fatalf("ctlFree(%q) = %v, the byte loop %v", b, got, want)
		}
	}
	base := []byte(strings.Repeat("abcdefgh", 3))
	for c := 0; c < 256; c++ {
		for i := range len(base) + 1 {
			b := append([]byte(nil), base[:i]...)
			b = append(b, byte(c))
			check(b)
			check(append(b, base...))
		}
	}
	edge := []byte{0, '\t', 0x1f, 0x20, 'a', 0x7e, 0x7f, 0x80, 0x9f, 0xa0, 0xff}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			if rng.IntN(8) == 0 {
				b[i] = edge[rng.IntN(len(edge))]
			} else {
				b[i] = byte(0x20 + rng.IntN(0x5e))
			}
		}
		check(b)
	}
}
