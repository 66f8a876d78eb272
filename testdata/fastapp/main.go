// Command fastapp is the bench's fast app (#25): a minimal HTTP/1.1 server
// whose handler costs almost nothing, so that a proxy's own CPU per request
// shows in the bench instead of being squeezed toward 1.0× by a slow app.
// testdata/testapp fills a 32 KiB buffer on every /bytes request (~85 µs of
// CPU on the bench machine); this one writes a prebuilt body.
//
// It listens on :3000 (env PORT overrides) and answers every path with
// ?n= bytes (default 1024, at most 1 MiB) of a fixed pattern: /bytes?n=1024
// as the testapp does, so the bench's rows run unchanged against it.
package main

import (
	"log"
	"net/http"
	"os"
	"strconv"
	"time"
)

const maxBody = 1 << 20

var body = func() []byte {
	b := make([]byte, maxBody)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}()

// lengths holds the Content-Length values of the common sizes, so the hot
// path formats nothing.
var lengths = map[int][]string{1 << 10: {"1024"}, 64 << 10: {"65536"}}

var octet = []string{"application/octet-stream"}

func serve(w http.ResponseWriter, r *http.Request) {
	n := 1024
	if q := r.URL.RawQuery; len(q) > 2 && q[:2] == "n=" {
		if v, err := strconv.Atoi(q[2:]); err == nil && v >= 0 && v <= maxBody {
			n = v
		}
	}
	h := w.Header()
	h["Content-Type"] = octet
	if l, ok := lengths[n]; ok {
		h["Content-Length"] = l
	} else {
		h["Content-Length"] = []string{strconv.Itoa(n)}
	}
	_, _ = w.Write(body[:n])
}

func main() {
	addr := ":3000"
	if p := os.Getenv("PORT"); p != "" {
		addr = ":" + p
	}
	log.Printf("fastapp: listening on %s", addr)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(serve), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
