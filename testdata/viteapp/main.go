// Command viteapp is a stand-in for a Vite dev server, for the bench's
// browser rows (#17). Like Vite in dev mode it serves an unbundled app: an
// index whose one module script imports a tree of ES modules, each answered
// with Cache-Control: no-cache and an ETag (a warm reload revalidates every
// module and gets 304s), and an HMR WebSocket that pushes an update when
// the module it names was edited. It is built statically into a FROM
// scratch image like testdata/testapp.
//
// It listens on :3000 (env PORT overrides); MODULES (default 300) sets the
// number of modules. Routes:
//
//	/                 index.html: the HMR client, #hmr, and /src/main.js
//	/src/mN.js        module N (0 is main.js's child root): imports its
//	                  children (N*4+1 … N*4+4 below MODULES), 300 B to 4 KiB
//	/src/main.js      imports m0.js; when it runs, every module has run:
//	                  it sets window.__done = performance.now() and
//	                  window.__modules = the number of modules that ran
//	/src/hmr.js       the module HMR edits: export const v = "edit-N"
//	/@vite/client     the HMR client: a WebSocket to /__hmr (subprotocol
//	                  vite-hmr); on {"type":"update","path","t"} it imports
//	                  path?t=, writes its v into #hmr and sets
//	                  window.__hmrAt (ms since the epoch, sub-ms) and
//	                  window.__hmrSeq
//	/__edit           POST: "edits" /src/hmr.js and pushes the update to
//	                  every HMR socket; answers {"seq": N}
//	/__stats          {"200": n, "304": n} module and index answers so far
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

const fanout = 4

type asset struct {
	body []byte
	etag string
}

type app struct {
	modules []asset // m0 … mN-1
	index   asset
	main    asset
	client  asset

	seq     atomic.Int64
	ok, nm  atomic.Int64 // 200s and 304s
	mu      sync.Mutex   // guards sockets
	sockets map[chan int64]struct{}
}

func main() {
	n := 300
	if v, err := strconv.Atoi(os.Getenv("MODULES")); err == nil && v > 0 {
		n = v
	}
	addr := ":3000"
	if p := os.Getenv("PORT"); p != "" {
		addr = ":" + p
	}
	a := newApp(n)
	log.Printf("viteapp: %d modules, listening on %s", n, addr)
	srv := &http.Server{Addr: addr, Handler: a, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

func mkAsset(s string) asset {
	sum := sha256.Sum256([]byte(s))
	return asset{body: []byte(s), etag: `W/"` + hex.EncodeToString(sum[:8]) + `"`}
}

func newApp(n int) *app {
	a := &app{modules: make([]asset, n), sockets: map[chan int64]struct{}{}}
	for i := range n {
		var b strings.Builder
		for c := i*fanout + 1; c <= i*fanout+fanout && c < n; c++ {
			fmt.Fprintf(&b, "import { v as v%d } from \"/src/m%d.js\";\n", c, c)
		}
		fmt.Fprintf(&b, "globalThis.__executed = (globalThis.__executed || 0) + 1;\nexport const v = \"m%d\";\n", i)
		// 300 B to 4 KiB, spread deterministically, like source files.
		size := 300 + (i*2654435761)%3800
		pad := "// " + strings.Repeat("lorem ipsum dolor sit amet ", size/27+1)
		b.WriteString(pad[:max(0, size-b.Len())])
		b.WriteString("\n")
		a.modules[i] = mkAsset(b.String())
	}
	a.main = mkAsset(`import "/src/m0.js";
window.__modules = globalThis.__executed;
window.__done = performance.now();
`)
	a.client = mkAsset(`const proto = location.protocol === "https:" ? "wss:" : "ws:";
const ws = new WebSocket(proto + "//" + location.host + "/__hmr", "vite-hmr");
window.__hmrSeq = 0;
ws.onopen = () => { window.__hmrOpen = true; };
ws.onmessage = async (e) => {
  const m = JSON.parse(e.data);
  if (m.type !== "update") return;
  const mod = await import(m.path + "?t=" + m.t);
  document.getElementById("hmr").textContent = mod.v;
  window.__hmrAt = performance.timeOrigin + performance.now();
  window.__hmrSeq = m.t;
};
`)
	a.index = mkAsset(`<!doctype html><html><head><meta charset="utf-8"><title>viteapp</title>
<script type="module" src="/@vite/client"></script>
<script type="module" src="/src/main.js"></script>
</head><body><div id="hmr">-</div></body></html>
`)
	return a
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/":
		a.serve(w, r, a.index, "text/html; charset=utf-8")
	case p == "/@vite/client":
		a.serve(w, r, a.client, "text/javascript")
	case p == "/src/main.js":
		a.serve(w, r, a.main, "text/javascript")
	case p == "/src/hmr.js":
		a.serve(w, r, mkAsset(fmt.Sprintf("export const v = \"edit-%d\";\n", a.seq.Load())), "text/javascript")
	case strings.HasPrefix(p, "/src/m") && strings.HasSuffix(p, ".js"):
		i, err := strconv.Atoi(p[len("/src/m") : len(p)-len(".js")])
		if err != nil || i < 0 || i >= len(a.modules) {
			http.NotFound(w, r)
			return
		}
		a.serve(w, r, a.modules[i], "text/javascript")
	case p == "/__hmr":
		a.hmr(w, r)
	case p == "/__edit" && r.Method == http.MethodPost:
		seq := a.seq.Add(1)
		a.mu.Lock()
		for ch := range a.sockets {
			select {
			case ch <- seq:
			default: // a socket that is behind gets the next one
			}
		}
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"seq\": %d}\n", seq)
	case p == "/__stats":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int64{"200": a.ok.Load(), "304": a.nm.Load()})
	default:
		http.NotFound(w, r)
	}
}

// serve answers with x, or 304 when the client has it (If-None-Match).
func (a *app) serve(w http.ResponseWriter, r *http.Request, x asset, ctype string) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Etag", x.etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, x.etag) {
		a.nm.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	a.ok.Add(1)
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(x.body)))
	w.Write(x.body)
}

// hmr holds an HMR socket and pushes an update for /src/hmr.js per edit.
func (a *app) hmr(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"vite-hmr"}, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer c.CloseNow()
	ch := make(chan int64, 16)
	a.mu.Lock()
	a.sockets[ch] = struct{}{}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.sockets, ch)
		a.mu.Unlock()
	}()
	ctx := c.CloseRead(r.Context())
	_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"connected"}`))
	for {
		select {
		case <-ctx.Done():
			return
		case seq := <-ch:
			msg := fmt.Sprintf(`{"type":"update","path":"/src/hmr.js","t":%d}`, seq)
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.Write(wctx, websocket.MessageText, []byte(msg))
			cancel()
			if err != nil {
				return
			}
		}
	}
}
