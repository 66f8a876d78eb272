// Package outbound is the one outbound header policy (#14): what a
// sandbox or a fixed upstream receives of a client's request head,
// whichever path carries it, and on the way back the host mode's mapping
// of a redirect (#22) and what a sandbox's answer may carry to the client
// (Host.Response, response.go). The gateway's exchange writes the head
// straight to the connection, the upgrade path sets it on its outgoing
// request; both call Host.Head and Fields, so the rules cannot drift
// apart:
//
//   - hop-by-hop headers (RFC 9110 7.6.1, and any the client's Connection
//     header names) are dropped; "Te: trailers" is kept when the client
//     accepts trailers (as httputil does);
//   - client-sent Forwarded and X-Forwarded-* are dropped, and the gateway
//     sets X-Forwarded-For (the peer address it saw), X-Forwarded-Host and
//     X-Forwarded-Proto;
//   - the other headers by which a proxy tells an app who the client is or
//     what it asked for are dropped, not passed on as the client wrote
//     them, so an app (or its framework) that believes one of them is
//     not fooled: X-Forwarded, Forwarded-For, X-Original-Forwarded-For,
//     X-Real-IP, True-Client-IP, Client-IP, X-Client-IP,
//     X-Cluster-Client-IP, CF-Connecting-IP, Fastly-Client-IP,
//     X-Envoy-External-Address, X-AppEngine-User-IP, X-ProxyUser-IP,
//     X-Originating-IP, X-Remote-IP, X-Remote-Addr, Remote-Addr,
//     X-Source-IP, X-Original-URL, X-Original-URI, X-Rewrite-URL,
//     X-Original-Host, X-Host, Front-End-Https, X-Url-Scheme and Via
//     (identityHeader). The gateway does not set them in their place:
//     X-Forwarded-For is the one the app gets. Names are matched without
//     case and with "_" as "-", because CGI-style servers (WSGI, PHP, Rack)
//     read X_Real_IP as X-Real-IP;
//   - the gateway's own X-Request-Id is sent whatever Connection says;
//   - the body's framing is not the client's: Content-Length (like the
//     hop-by-hop Transfer-Encoding) is left to whoever sends the body;
//   - tokens never reach the sandbox: the access check strips its cookie,
//     the Authorization header and ?access_token= (Tokens.Stripped,
//     auth.Verifier's);
//   - the Host (and an upgrade's own Origin) is the host mode's (Mode,
//     hostmode.go); a fixed upstream gets its own. It is the only Host
//     sent: a "host" field an HTTP/2 client sends besides :authority
//     stays in r.Header and is dropped (#24), or a dev server's host
//     check would see two.
//
// Which mode a sandbox gets is the gateway's decision (its template's
// host_header); this package holds no config and decides no access.
// Tested in outbound_test.go, and end to end by the gateway's
// TestHostModes and TestBrowserStockDevServers.
package outbound

import (
	"net"
	"net/http"

	"github.com/previewgate/previewgate/internal/wire"
)

// Tokens is what the policy needs from the access check;
// *auth.Verifier implements it.
type Tokens interface {
	// Stripped returns r's token-carrying headers that must leave
	// changed (nil lines: removed) and r's raw query without the token.
	Stripped(r *http.Request) (wire.Edits, string)
	// OwnOrigin reports whether r's Origin is the preview's own.
	OwnOrigin(r *http.Request) bool
}

// Sink receives the fields of an outbound request head: wire.LineSink on
// the exchange, wire.HeaderSink on the upgrade path.
type Sink interface {
	Field(k, v string)
	Fields(k string, vv []string)
}

var (
	_ Sink = (*wire.LineSink)(nil)
	_ Sink = wire.HeaderSink(nil)
)

// Head returns the Host (hostPfx+host: the local mode's "localhost:" and
// the port, so the exchange writes it without building a string) and
// raw query the upstream at addr (the sandbox's ip:port) gets for r, and
// r's token-carrying headers as tok leaves them, for Fields.
func (h Host) Head(r *http.Request, addr string, tok Tokens) (hostPfx, host, query string, stripped wire.Edits) {
	stripped, query = tok.Stripped(r)
	switch h.Mode {
	case Upstream:
		host = ""
	case Rewrite:
		host = addr
	case Local:
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			host = r.Host
			break
		}
		hostPfx, host = LocalhostPrefix, port
		// An upgrade's own Origin only (hostmode.go).
		if v := r.Header["Upgrade"]; len(v) > 0 && v[0] != "" && tok.OwnOrigin(r) {
			stripped.Set("Origin", []string{"http://" + LocalhostPrefix + port}) // one of wire.MaxEdits: 3 token headers and this
		}
	default:
		host = r.Host
	}
	return hostPfx, host, query, stripped
}

// Fields hands the fields the upstream gets for r to sink; stripped is
// Head's. tls: the client reached the gateway over TLS (X-Forwarded-Proto),
// also when r.TLS is nil behind a TLS listener of the gateway's own.
func Fields(r *http.Request, stripped *wire.Edits, tls bool, sink Sink) {
	conn := wire.ConnectionTokens(r.Header)
	for k, vv := range r.Header {
		if k == "Host" || k == "Content-Length" || wire.HopByHop(k, conn) || identityHeader(k) {
			continue
		}
		if sv, ok := stripped.Get(k); ok {
			vv = sv // nil: removed
		}
		if len(vv) > 0 {
			sink.Fields(k, vv)
		}
	}
	if wire.ContainsToken(r.Header["Te"], "trailers") {
		sink.Field("Te", "trailers")
	}
	if id := r.Header["X-Request-Id"]; len(id) > 0 {
		sink.Field("X-Request-Id", id[0])
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sink.Field("X-Forwarded-For", ip)
	}
	sink.Field("X-Forwarded-Host", r.Host)
	if tls || r.TLS != nil {
		sink.Field("X-Forwarded-Proto", "https")
	} else {
		sink.Field("X-Forwarded-Proto", "http")
	}
}

// identityNames are the client-sent fields that say who the client is or
// what it asked for (lower case, "-" for "_"), besides the X-Forwarded-
// prefix: the client's are dropped. X-Request-Id is among them: the
// gateway sends its own (Fields), and another spelling of it must not
// reach a CGI-style server as the same variable.
var identityNames = [...]string{
	"forwarded", "x-forwarded", "forwarded-for", "x-original-forwarded-for",
	"x-real-ip", "true-client-ip", "client-ip", "x-client-ip", "x-cluster-client-ip",
	"cf-connecting-ip", "fastly-client-ip", "x-envoy-external-address",
	"x-appengine-user-ip", "x-proxyuser-ip", "x-originating-ip", "x-remote-ip",
	"x-remote-addr", "remote-addr", "x-source-ip",
	"x-original-url", "x-original-uri", "x-rewrite-url", "x-original-host", "x-host",
	"front-end-https", "x-url-scheme", "via",
	"x-request-id",
}

// identityHeader reports a client-sent field the gateway drops because it
// would tell the app who the client is or what it asked for (the package
// doc): any X-Forwarded-*, and identityNames, compared without case and
// with "_" as "-". Allocates nothing: it runs for every field of every
// request.
func identityHeader(k string) bool {
	const xf = "x-forwarded-"
	if len(k) > len(xf) && foldEqual(k[:len(xf)], xf) {
		return true
	}
	for _, n := range identityNames {
		if len(n) == len(k) && foldEqual(k, n) {
			return true
		}
	}
	return false
}

// foldEqual reports whether k equals n (lower case, "-" for "_", as
// long as k) with ASCII case folded and "_" read as "-".
func foldEqual(k, n string) bool {
	for i := 0; i < len(n); i++ {
		c := k[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		} else if c == '_' {
			c = '-'
		}
		if c != n[i] {
			return false
		}
	}
	return true
}
