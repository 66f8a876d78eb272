// Package demoapp is the app behind the embedded development default's demo
// template: a page with a live WebSocket counter, so a user sees the proxy
// and the socket work. The gateway binary carries it (`previewgate demo-app`)
// and packs itself into a FROM scratch image, so no registry is needed. It
// serves the demo page only and never sees a token (the gateway strips them).
package demoapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/coder/websocket"
)

// Handler serves the demo page on / and the counter socket on /ws.
func Handler(log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		host, _ := os.Hostname()
		fmt.Fprintf(w, page, host)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		// The gateway already checked the origin of cookie-authenticated
		// upgrades. In the default host mode (local) Host and Origin are
		// localhost:3000 here; with preserve they are the preview's.
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := c.CloseRead(r.Context())
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for n := 1; ; n++ {
			if err := c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "%d", n)); err != nil {
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	})
	return mux
}

// Serve runs the demo app on addr until ctx ends.
func Serve(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("demo app: %w", err)
	}
	srv := &http.Server{Handler: Handler(log), ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	log.Info("demo app listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("demo app: %w", err)
	}
	return nil
}

const page = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>previewgate demo</title>
<style>body{font:18px/1.5 system-ui,sans-serif;max-width:34em;margin:12vh auto;padding:0 1em;color:#222}
#n{font-size:4em;font-weight:700;font-variant-numeric:tabular-nums}.ok{color:#080}.bad{color:#b00}</style></head>
<body>
<h1>It works.</h1>
<p>This page comes from a sandbox container (<code>%s</code>) through previewgate.</p>
<p>WebSocket counter: <span id="n">–</span> <span id="s">connecting…</span></p>
<script>
(function connect(){
  var ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  var s = document.getElementById("s");
  ws.onopen = function(){ s.textContent = "live"; s.className = "ok"; };
  ws.onmessage = function(e){ document.getElementById("n").textContent = e.data; };
  ws.onclose = function(){ s.textContent = "disconnected, retrying"; s.className = "bad"; setTimeout(connect, 2000); };
})();
</script>
</body></html>
`
