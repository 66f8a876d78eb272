// Command devserver is a test dev server that protects itself the way
// stock Vite and Next.js dev servers do (#22), so a test can show that a
// preview works with them unmodified. RULE selects whose checks it applies,
// each as the project's own source defines it:
//
//	RULE=vite  Vite (packages/vite/src/node/server/middlewares/hostCheck.ts
//	           with host-validation-middleware's isHostAllowed, and the HMR
//	           socket's shouldHandle in ws.ts): every request whose Host is
//	           not localhost, *.localhost, an IPv4 or IPv6 address (or in
//	           server.allowedHosts, empty here) answers 403 "Blocked
//	           request. This host (...) is not allowed."; an upgrade on the
//	           HMR path with Sec-WebSocket-Protocol vite-hmr is refused
//	           (400, as the ws library's abortHandshake) unless its Host
//	           passes the same check and, when it carries an Origin, its
//	           ?token= equals the per-process token served in /@vite/client.
//	RULE=next  Next.js (packages/next/src/server/lib/router-utils/
//	           block-cross-site.ts in block mode, as with allowedDevOrigins
//	           set or in Next.js 16, and csrf-protection.ts's
//	           isCsrfOriginAllowed): a request whose URL contains /_next or
//	           /__nextjs is refused with 403 "Unauthorized" (an upgrade: the
//	           bare word on the socket, then close) when it is no-cors and
//	           cross-site, or when its Origin's hostname is not allowed by
//	           ["*.localhost", "localhost", HOSTNAME]. The HMR socket is
//	           /_next/webpack-hmr.
//
// Both serve / (an index whose module script renders #app = "rendered"
// and opens the HMR socket: window.__hmr is "open", then "closed" or
// "error"), and POST /__edit pushes an update; the page's #hmr shows
// "edit-N" once the updated module ran. /__redirect redirects to / by an
// absolute URL built from Host. PORT (default 3000) is the port,
// HOSTNAME (default 0.0.0.0) Next.js's configured hostname.
package main

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

type server struct {
	rule     string
	token    string // Vite's per-process webSocketToken
	hostname string // Next.js's configured hostname
	seq      atomic.Int64
	mu       sync.Mutex // guards sockets
	sockets  map[*websocket.Conn]struct{}
}

func main() {
	s := &server{rule: os.Getenv("RULE"), hostname: os.Getenv("HOSTNAME"), sockets: map[*websocket.Conn]struct{}{}}
	if s.rule != "vite" && s.rule != "next" {
		log.Fatal("RULE must be vite or next")
	}
	if s.hostname == "" {
		s.hostname = "0.0.0.0"
	}
	var b [16]byte
	rand.Read(b[:])
	s.token = hex.EncodeToString(b[:])
	addr := ":3000"
	if p := os.Getenv("PORT"); p != "" {
		addr = ":" + p
	}
	if a := os.Getenv("ADDR"); a != "" {
		addr = a
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("devserver %s listening on %s\n", s.rule, ln.Addr()) // the test reads this line
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	if s.rule == "vite" {
		s.vite(w, r, upgrade)
	} else {
		s.next(w, r, upgrade)
	}
}

// ---- Vite ----

func (s *server) vite(w http.ResponseWriter, r *http.Request, upgrade bool) {
	if upgrade {
		// ws.ts: an upgrade on the HMR base path with the vite-hmr
		// protocol goes through shouldHandle; other upgrades are left
		// alone (no answer at all: the socket hangs up).
		if r.Header.Get("Sec-Websocket-Protocol") != "vite-hmr" || r.URL.Path != "/" {
			hangUp(w)
			return
		}
		if !viteHostAllowed(r.Host, true) || r.Header.Get("Origin") != "" && !s.validToken(r.URL.Query().Get("token")) {
			http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
			return
		}
		s.hmr(w, r, "vite-hmr")
		return
	}
	// hostValidationMiddleware, in front of every other middleware.
	if !viteHostAllowed(r.Host, r.Host == "") {
		hostname := trailingPort.ReplaceAllString(r.Host, "")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "Blocked request. This host (%q) is not allowed.\nTo allow this host, add %q to `server.allowedHosts` in vite.config.js.", hostname, hostname)
		return
	}
	switch r.URL.Path {
	case "/":
		page(w, `<script type="module" src="/@vite/client"></script><script type="module" src="/src/main.js"></script>`)
	case "/@vite/client":
		js(w, fmt.Sprintf(`const token = %q;
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/?token=" + token, "vite-hmr");
window.__hmr = "connecting";
ws.onopen = () => { window.__hmr = "open"; };
ws.onerror = () => { window.__hmr = "error"; };
ws.onclose = () => { if (window.__hmr !== "error") window.__hmr = "closed"; };
ws.onmessage = async (e) => {
  const m = JSON.parse(e.data);
  if (m.type !== "update") return;
  const mod = await import("/src/hmr.js?t=" + m.seq);
  document.getElementById("hmr").textContent = mod.v;
};
`, s.token))
	case "/src/main.js":
		js(w, `document.getElementById("app").textContent = "rendered";`)
	case "/src/hmr.js":
		js(w, fmt.Sprintf("export const v = \"edit-%d\";\n", s.seq.Load()))
	case "/__edit":
		s.edit(w, r)
	case "/__redirect":
		redirectHome(w, r)
	default:
		http.NotFound(w, r)
	}
}

// trailingPort is the middleware's /:\d+$/ for its message.
var trailingPort = regexp.MustCompile(`:\d+$`)

// viteHostAllowed is host-validation-middleware's isHostAllowed with an
// empty allowedHosts: an absent Host passes; file: and *-extension:
// pseudo-hosts pass; IP addresses pass; localhost and *.localhost pass.
func viteHostAllowed(host string, absent bool) bool {
	if absent {
		return true
	}
	lower := strings.ToLower(host)
	if i := strings.IndexByte(lower, ':'); i > 0 && (lower[:i] == "file" || strings.HasSuffix(lower[:i], "-extension")) {
		return true
	}
	h := strings.TrimSpace(host)
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		ip := net.ParseIP(h[1:end])
		return ip != nil && ip.To4() == nil
	}
	if i := strings.IndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	if ip := net.ParseIP(h); ip != nil && ip.To4() != nil && !strings.Contains(h, ":") {
		return true
	}
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// validToken is ws.ts's hasValidToken (timingSafeEqual; unequal lengths
// fail).
func (s *server) validToken(tok string) bool {
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) == 1
}

// ---- Next.js ----

func (s *server) next(w http.ResponseWriter, r *http.Request, upgrade bool) {
	if s.blockCrossSite(r) {
		if upgrade {
			// res.end('Unauthorized') on the upgrade's socket.
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Write([]byte("Unauthorized"))
				c.Close()
			}
			return
		}
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("Unauthorized"))
		return
	}
	switch r.URL.Path {
	case "/":
		page(w, `<script defer src="/_next/static/chunks/main.js"></script>`)
	case "/_next/static/chunks/main.js":
		js(w, `document.getElementById("app").textContent = "rendered";
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/_next/webpack-hmr");
window.__hmr = "connecting";
ws.onopen = () => { window.__hmr = "open"; };
ws.onerror = () => { window.__hmr = "error"; };
ws.onclose = () => { if (window.__hmr !== "error") window.__hmr = "closed"; };
ws.onmessage = (e) => { const m = JSON.parse(e.data); if (m.type === "update") document.getElementById("hmr").textContent = "edit-" + m.seq; };
`)
	case "/_next/webpack-hmr":
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		s.hmr(w, r, "")
	case "/__edit":
		s.edit(w, r)
	case "/__redirect":
		redirectHome(w, r)
	default:
		http.NotFound(w, r)
	}
}

// blockCrossSite is block-cross-site.ts in block mode.
func (s *server) blockCrossSite(r *http.Request) bool {
	allowed := []string{"*.localhost", "localhost", s.hostname}
	if !strings.Contains(r.RequestURI, "/_next") && !strings.Contains(r.RequestURI, "/__nextjs") {
		return false
	}
	if r.Header.Get("Sec-Fetch-Mode") == "no-cors" && r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return true
	}
	if raw := r.Header.Get("Origin"); raw != "" {
		if u, err := url.Parse(raw); err == nil {
			if !csrfOriginAllowed(strings.ToLower(u.Hostname()), allowed) {
				return true
			}
		}
	}
	return false
}

// csrfOriginAllowed is csrf-protection.ts's isCsrfOriginAllowed.
func csrfOriginAllowed(origin string, allowed []string) bool {
	for _, a := range allowed {
		if a != "" && (a == origin || matchWildcardDomain(origin, a)) {
			return true
		}
	}
	return false
}

// matchWildcardDomain is csrf-protection.ts's: the last two labels of the
// pattern must match literally (a wildcard there is invalid, so
// "*.localhost" matches nothing as a wildcard), then "*" matches one
// non-empty label and a final "**" any number.
func matchWildcardDomain(domain, pattern string) bool {
	d := strings.Split(domain, ".")
	p := strings.Split(pattern, ".")
	if len(d) < len(p) {
		return false
	}
	pop := func(s *[]string) (string, bool) {
		if len(*s) == 0 {
			return "", false
		}
		v := (*s)[len(*s)-1]
		*s = (*s)[:len(*s)-1]
		return v, true
	}
	for depth := 0; len(p) > 0 && depth < 2; depth++ {
		pp, _ := pop(&p)
		dp, _ := pop(&d)
		switch pp {
		case "", "*", "**":
			return false
		default:
			if dp != pp {
				return false
			}
		}
	}
	for len(p) > 0 {
		pp, _ := pop(&p)
		dp, ok := pop(&d)
		switch pp {
		case "":
			return false
		case "*":
			if !ok || dp == "" {
				return false
			}
		case "**":
			if len(p) > 0 {
				return false
			}
			return ok
		default:
			if dp != pp {
				return false
			}
		}
	}
	return len(d) == 0
}

// ---- shared ----

func (s *server) hmr(w http.ResponseWriter, r *http.Request, proto string) {
	opts := &websocket.AcceptOptions{InsecureSkipVerify: true} // the checks above are the dev server's
	if proto != "" {
		opts.Subprotocols = []string{proto}
	}
	c, err := websocket.Accept(w, r, opts)
	if err != nil {
		return
	}
	defer c.CloseNow()
	s.mu.Lock()
	s.sockets[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sockets, c)
		s.mu.Unlock()
	}()
	ctx := c.CloseRead(r.Context())
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"connected"}`))
	<-ctx.Done()
}

// edit pushes an update to every HMR socket.
func (s *server) edit(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST", http.StatusMethodNotAllowed)
		return
	}
	seq := s.seq.Add(1)
	msg := []byte(fmt.Sprintf(`{"type":"update","seq":%d}`, seq))
	s.mu.Lock()
	var n int
	for c := range s.sockets {
		if c.Write(r.Context(), websocket.MessageText, msg) == nil {
			n++
		}
	}
	s.mu.Unlock()
	fmt.Fprintf(w, "{\"seq\": %d, \"sockets\": %d}\n", seq, n)
}

func page(w http.ResponseWriter, scripts string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><html><head><meta charset=\"utf-8\"><title>devserver</title>%s</head><body><div id=\"app\">-</div><div id=\"hmr\">-</div></body></html>\n", scripts)
}

func js(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/javascript")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write([]byte(body))
}

// redirectHome redirects to / by an absolute URL built from Host, as
// frameworks do for a trailing-slash or login redirect.
func redirectHome(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "http://"+r.Host+"/", http.StatusFound)
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		c.Close()
	}
}
