// Command testapp is the dev server stand-in used by integration tests. It is
// built statically into a FROM scratch image by internal/testing/dockertest.
//
// It listens on :3000 (env PORT overrides). LISTEN_DELAY (a duration) delays
// listening, like a slow dev server; NEVER_LISTEN=1 never listens; CRASH=msg
// prints msg (and a line of ANSI-colored noise) to stderr and exits 1, like
// a dev server failing on a bad import. Routes:
//
//	/        JSON {method, path, query, host, headers, remote_addr}
//	/ws      WebSocket: echoes every message, pushes "tick N" every WS_PUSH (100ms)
//	/sse     text/event-stream: one event every 100ms for 2s (?n= events: n/10 s), flushed each
//	/slow    sleeps ?d= (default 1s), then answers
//	/bytes   answers ?n= bytes (default 1024)
//	/upload  POST: streams the body, answers {"length": n, "sha256": hex}
//	/page    HTML that fetches /echo?x=1, opens a WebSocket to /ws, sends
//	         "from-page" and, once echoed, posts to its parent
//	         {location, ws: "echoed"|"error", echo: <the echo JSON>}
//	/echo    same as /
//	/dial    ?addr=host:port: tries a TCP connect (2s timeout), answers
//	         {"ok": bool, "err": string}
//	/ws?flood=N  WebSocket that pushes N bytes in 64 KiB messages as fast as
//	         the connection takes them, then keeps the socket open
//	/file    ?name=N: GET reads, PUT writes (at most 64 KiB) file N in the
//	         directory $FILES_DIR (files.go)
//
// Misbehaviour on command, as a hostile sandbox would (hostile.go): see
// hostileRoutes.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

func main() {
	if n, err := strconv.Atoi(os.Getenv("EAT_MIB")); err == nil && n > 0 {
		// Touch n MiB before listening: over the container's memory limit
		// the kernel kills it (OOMKilled).
		fmt.Fprintf(os.Stdout, "testapp: eating %d MiB\n", n)
		hog := make([][]byte, 0, n)
		for range n {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			hog = append(hog, b)
		}
		runtime.KeepAlive(hog)
	}
	if msg := os.Getenv("CRASH"); msg != "" {
		fmt.Fprintln(os.Stdout, "testapp: starting dev server")
		fmt.Fprintln(os.Stderr, "\x1b[31m"+msg+"\x1b[0m")
		os.Exit(1)
	}
	if os.Getenv("NEVER_LISTEN") == "1" {
		log.Print("testapp: NEVER_LISTEN=1, not listening")
		for { // not select{}: with no other goroutine the runtime calls that a deadlock and exits
			time.Sleep(time.Hour)
		}
	}
	if d, err := time.ParseDuration(os.Getenv("LISTEN_DELAY")); err == nil {
		log.Printf("testapp: compiling for %s before listening", d)
		time.Sleep(d)
	}
	if d, err := time.ParseDuration(os.Getenv("CHATTER")); err == nil && d > 0 {
		go chatter(d)
	}
	addr := ":3000"
	if p := os.Getenv("PORT"); p != "" {
		addr = ":" + p
	}
	log.Printf("testapp: listening on %s", addr)
	srv := &http.Server{Addr: addr, Handler: handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

func handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", echo)
	mux.HandleFunc("/ws", ws)
	mux.HandleFunc("/sse", sse)
	mux.HandleFunc("/slow", slow)
	mux.HandleFunc("/bytes", bytes)
	mux.HandleFunc("/upload", upload)
	mux.HandleFunc("/echo", echo)
	mux.HandleFunc("/page", page)
	mux.HandleFunc("/dial", dial)
	mux.HandleFunc("/file", file)
	for path, h := range hostileRoutes {
		mux.HandleFunc(path, h)
	}
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func echo(w http.ResponseWriter, r *http.Request) {
	hostname, _ := os.Hostname() // in a container: its ID's first 12 characters
	writeJSON(w, map[string]any{
		"hostname":    hostname,
		"method":      r.Method,
		"path":        r.URL.Path,
		"query":       r.URL.RawQuery,
		"host":        r.Host,
		"headers":     r.Header,
		"remote_addr": r.RemoteAddr,
	})
}

func ws(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer c.CloseNow()
	if n, err := strconv.Atoi(r.URL.Query().Get("flood")); err == nil {
		flood(r.Context(), c, n)
		return
	}
	every := 100 * time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("WS_PUSH")); err == nil && d > 0 {
		every = d
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		defer cancel()
		t := time.NewTicker(every)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if c.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf("tick %d", n))) != nil {
					return
				}
			}
		}
	}()
	for {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		if c.Write(ctx, typ, msg) != nil {
			return
		}
	}
}

func sse(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	events := 20
	if n, err := strconv.Atoi(r.URL.Query().Get("n")); err == nil && n > 0 {
		events = n
	}
	for n := 1; n <= events; n++ {
		if _, err := fmt.Fprintf(w, "id: %d\ndata: event %d\n\n", n, n); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

func slow(w http.ResponseWriter, r *http.Request) {
	d, err := time.ParseDuration(r.URL.Query().Get("d"))
	if err != nil {
		d = time.Second
	}
	select {
	case <-time.After(d):
		writeJSON(w, map[string]any{"slept": d.String()})
	case <-r.Context().Done():
	}
}

func bytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 {
		n = 1024
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	buf := make([]byte, 32<<10)
	for i := range buf {
		buf[i] = 'a' + byte(i%26)
	}
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}

func upload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	h := sha256.New()
	n, err := io.Copy(h, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, map[string]any{"length": n, "sha256": hex.EncodeToString(h.Sum(nil))})
}

// pageHTML exercises what a dev server's page does through the gateway: a
// same-origin fetch and an HMR-like WebSocket, both riding the cookie.
const pageHTML = `<!doctype html><html><head><meta charset="utf-8"><title>testapp page</title></head>
<body><h1 id="app">testapp page</h1><pre id="out"></pre>
<script>
(async () => {
  let echo = null, ws = "pending";
  const report = () => {
    const msg = JSON.stringify({location: location.href, ws: ws, echo: echo});
    document.getElementById("out").textContent = msg;
    if (parent !== window) parent.postMessage(msg, "*");
  };
  try { echo = await (await fetch("/echo?x=1")).json(); } catch (e) { echo = {error: String(e)}; }
  const sock = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  let done = false;
  const finish = (state) => { if (done) return; done = true; ws = state; report(); };
  sock.onopen = () => sock.send("from-page");
  sock.onmessage = (e) => { if (e.data === "from-page") { finish("echoed"); sock.close(); } };
  sock.onerror = () => finish("error");
  sock.onclose = () => finish("error");
})();
</script></body></html>
`

func page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, pageHTML)
}

// dial reports whether this container can open a TCP connection to ?addr=,
// so tests can check network isolation from inside a sandbox.
func dial(w http.ResponseWriter, r *http.Request) {
	addr := r.URL.Query().Get("addr")
	if addr == "" {
		http.Error(w, "missing ?addr=host:port", http.StatusBadRequest)
		return
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(r.Context(), "tcp", addr)
	if err != nil {
		writeJSON(w, map[string]any{"ok": false, "err": err.Error()})
		return
	}
	_ = c.Close()
	writeJSON(w, map[string]any{"ok": true, "err": ""})
}
