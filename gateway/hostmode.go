package gateway

import (
	"net"
	"net/http"
	"strings"

	"github.com/previewgate/previewgate/config"
)

// Host modes (#22). Stock dev servers protect themselves from DNS
// rebinding and cross-site WebSocket hijacking: Vite (>= 5.4.12 / 6.0.9)
// answers 403 to a request, and refuses an upgrade, whose Host is not
// localhost, *.localhost, an IP or listed in server.allowedHosts; Next.js
// (>= 15.2; 16 blocks) refuses a request for /_next/* or its HMR socket
// whose Origin's hostname is not localhost or in allowedDevOrigins. The
// gateway has already checked the user and, for a cookie-authenticated
// upgrade, the Origin (auth); in the local mode it then presents the
// request as the app would see it on its own machine:
//
//   - Host is localhost:<app port>, on plain requests and upgrades alike;
//   - an upgrade's Origin that is the preview's own (auth.Verifier.OwnOrigin)
//     becomes http://localhost:<app port>; any other Origin passes
//     unchanged, so the app's own check still refuses it. A plain
//     request's Origin is never changed: Next.js compares a Server
//     Action's Origin with X-Forwarded-Host, which carries the real host;
//   - X-Forwarded-Host, -Proto and -For carry the real host, scheme and
//     client (as in every mode);
//   - a Location header pointing at the local identity (http://,
//     https:// or //localhost:<port>) is mapped back to the preview
//     (scheme-relative, //<preview host>/..., so the browser keeps its
//     scheme), and a redirect the app builds from Host stays on the preview.
//
// preserve sends the preview's own Host and Origin; rewrite sends the
// container's address as Host (kept unchanged for configs that name it).

// hostMode is what a target's template asks of the outbound head.
type hostMode struct {
	local   bool   // the local mode: the app is reached as localhost:<port of addr>
	preview string // the preview's host (r.Host), for Location mapping (local mode)
	rewrite bool   // Host is the container address (rewrite mode, fixed upstreams)
}

// hostModeFor returns the host mode of tpl for r.
func (g *Gateway) hostModeFor(tpl *config.Template, r *http.Request) hostMode {
	switch tpl.HostHeader {
	case config.HostRewrite:
		return hostMode{rewrite: true}
	case config.HostPreserve:
		return hostMode{}
	}
	return hostMode{local: true, preview: r.Host}
}

// localhostPrefix starts the app's local identity, localhost:<port>.
const localhostPrefix = "localhost:"

// localAuthority is the app's local identity, localhost:<port of addr>
// ("" if addr has no port).
func localAuthority(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return localhostPrefix + port
}

// mapLocation points a Location at t's local identity back at the
// preview. h belongs to the response being written to the client.
func (t *target) mapLocation(h http.Header) {
	if !t.host.local {
		return
	}
	vv := h["Location"]
	if len(vv) != 1 {
		return
	}
	local := localAuthority(t.addr)
	for _, pfx := range [...]string{"http://", "https://", "//"} {
		loc := vv[0]
		n := len(pfx) + len(local)
		if local == "" || len(loc) < n || !strings.EqualFold(loc[:n], pfx+local) {
			continue
		}
		rest := loc[n:]
		if rest != "" && rest[0] != '/' && rest[0] != '?' && rest[0] != '#' {
			return // localhost:30001 is not localhost:3000
		}
		// Scheme-relative: the browser keeps the scheme it used, also
		// behind a proxy that terminates TLS in front of a plain-HTTP
		// gateway. Built here, where a Location is mapped, not per request.
		h["Location"] = []string{"//" + strings.ToLower(t.host.preview) + rest}
		return
	}
}
