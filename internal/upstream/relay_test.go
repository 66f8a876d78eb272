package upstream

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Relay passes on what ReverseProxy would: end-to-end headers, declared
// trailers announced and then sent, a body of unknown length flushed as it
// comes; a body cut short is an error for the caller to abort on.
func TestRelay(t *testing.T) {
	const in = "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nConnection: X-Hop\r\nX-Hop: 1\r\n" +
		"Keep-Alive: timeout=5\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n"
	resp, err := ReadFinal(bufio.NewReader(strings.NewReader(in)), http.MethodGet, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	RelayHeader(rec.Header(), resp)
	if err := Relay(rec, resp, NewBufferPool()); err != nil {
		t.Fatalf("Relay: %v", err)
	}
	res := rec.Result()
	if res.StatusCode != http.StatusCreated || rec.Body.String() != "hello" || !rec.Flushed {
		t.Errorf("got %d %q flushed=%v, want 201 \"hello\" flushed", res.StatusCode, rec.Body.String(), rec.Flushed)
	}
	for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Transfer-Encoding"} {
		if _, ok := res.Header[k]; ok {
			t.Errorf("hop-by-hop %s relayed", k)
		}
	}
	if got := res.Header.Get("Trailer"); got != "X-Sum" {
		t.Errorf("Trailer announced %q, want X-Sum", got)
	}
	if got := res.Trailer.Get("X-Sum"); got != "42" {
		t.Errorf("trailer X-Sum %q, want 42", got)
	}

	cut := "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"
	resp, err = ReadFinal(bufio.NewReader(strings.NewReader(cut)), http.MethodGet, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	if err := Relay(rec, resp, NewBufferPool()); err == nil {
		t.Errorf("a body cut at 5 of 10 bytes relayed without error")
	}
	if rec.Flushed {
		t.Errorf("a body of known length was flushed")
	}
}
