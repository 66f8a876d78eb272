package outbound

import (
	"net"
	"net/http"
	"strings"
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
//   - an upgrade's Origin that is the preview's own (Tokens.OwnOrigin)
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

// Mode is the identity of the app a request is presented with.
type Mode uint8

const (
	// Preserve (the zero Mode): the preview's own Host and Origin.
	Preserve Mode = iota
	// Local: the app is reached as localhost:<port of its address>.
	Local
	// Rewrite: Host is the container's address.
	Rewrite
	// Upstream: a fixed upstream, whose URL gives the Host.
	Upstream
)

// Host is what a request's target asks of the outbound head.
type Host struct {
	Mode Mode
	// Preview is the preview's host (the client's r.Host), which a
	// Location at the local identity is mapped back to (Local only).
	Preview string
}

// LocalhostPrefix starts the app's local identity, localhost:<port>.
const LocalhostPrefix = "localhost:"

// localAuthority is the app's local identity, localhost:<port of addr>
// ("" if addr has no port).
func localAuthority(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return LocalhostPrefix + port
}

// MapLocation points a Location at the local identity of the app at addr
// back at the preview (Local only). hdr belongs to the response being
// written to the client.
func (h Host) MapLocation(hdr http.Header, addr string) {
	if h.Mode != Local {
		return
	}
	vv := hdr["Location"]
	if len(vv) != 1 {
		return
	}
	local := localAuthority(addr)
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
		hdr["Location"] = []string{"//" + strings.ToLower(h.Preview) + rest}
		return
	}
}
