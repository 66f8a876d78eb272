package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// byHeader keys a request's instance by its X-Instance header (none: a
// fixed upstream), as the gateway keys by the route's instance.
func byHeader(r *http.Request) (string, bool) {
	k := r.Header.Get("X-Instance")
	return k, k != ""
}

// TestClientsBoundWrites: a sandbox that never reads a request body fails
// the ReverseProxy path's write within the write bound, not when the
// client gives up (invariant 5 on the Transports NewClients returns).
func TestClientsBoundWrites(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never read
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	_, ts := newClients(byHeader, 300*time.Millisecond)
	defer ts.CloseIdleConnections()
	// The context only ends a test whose writes are not bounded.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := bytes.NewReader(make([]byte, 64<<20)) // far beyond both socket buffers
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ln.Addr().String()+"/upload", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Instance", "inst")
	resp, err := ts.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a sandbox that reads nothing took a 64 MiB body")
	}
	if ctx.Err() != nil {
		t.Fatalf("the write was not bounded: it ended with the request's context: %v", err)
	}
	if !isTimeout(err) {
		t.Fatalf("RoundTrip: %v, want the write deadline's timeout", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestClientsPerInstanceAndRaw: the Transports keep one connection pool
// per instance (invariant 1: two instances at one address never share a
// connection; one instance reuses its own), and pass the client's
// encodings through: no Accept-Encoding is added, no body is decoded.
func TestClientsPerInstanceAndRaw(t *testing.T) {
	var mu sync.Mutex
	var remotes []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		remotes = append(remotes, r.RemoteAddr)
		mu.Unlock()
		w.Header().Set("Content-Encoding", "gzip")
		io.WriteString(w, "not gzip at all; ae="+r.Header.Get("Accept-Encoding"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	_, ts := newClients(byHeader, time.Minute)
	defer ts.CloseIdleConnections()
	get := func(instance string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Instance", instance)
		resp, err := ts.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, inst := range []string{"a", "b", "a", "b"} {
		if got := get(inst); got != "not gzip at all; ae=" {
			t.Fatalf("instance %s: body %q: the transport changed encodings (want the app's bytes, no Accept-Encoding added)", inst, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(remotes) != 4 {
		t.Fatalf("%d requests reached the app, want 4", len(remotes))
	}
	if remotes[0] == remotes[1] {
		t.Errorf("instances a and b shared the connection %s", remotes[0])
	}
	if remotes[2] != remotes[0] || remotes[3] != remotes[1] {
		t.Errorf("an instance did not reuse its own idle connection: %v", remotes)
	}
}
