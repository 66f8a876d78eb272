package gateway

import (
	"net"
	"net/http"

	"github.com/previewgate/previewgate/internal/wire"
)

// The one outbound header policy (#14): what a sandbox or a fixed upstream
// receives of a client's request head, whichever path carries it. The
// direct path writes it straight to the connection, ReverseProxy's Rewrite
// and the upgrade path set it on their outgoing request; all three call
// outboundHead and outboundFields, so the rules cannot drift apart:
//
//   - hop-by-hop headers (RFC 9110 7.6.1, and any the client's Connection
//     header names) are dropped; "Te: trailers" is kept when the client
//     accepts trailers (as httputil does);
//   - client-sent Forwarded and X-Forwarded-* are dropped, and the gateway
//     sets X-Forwarded-For (the peer address it saw), X-Forwarded-Host and
//     X-Forwarded-Proto;
//   - the gateway's own X-Request-Id is sent whatever Connection says;
//   - tokens never reach the sandbox: the verifier strips its cookie, the
//     Authorization header and ?access_token= (auth.Verifier.Strip);
//   - the Host is the template's host mode's (hostmode.go): in the local
//     mode localhost:<app port>, and an upgrade's own Origin becomes
//     http://localhost:<app port>; in preserve the client's; in rewrite
//     the sandbox's address; a fixed upstream gets its own (empty: the
//     URL's).
//     It is the only Host sent: a "host" field an HTTP/2 client sends
//     besides :authority stays in r.Header and is dropped (#24), or a dev
//     server's host check would see two.

// outboundSink receives the fields of an outbound request head:
// wire.LineSink on the direct path, wire.HeaderSink on the others.
type outboundSink interface {
	Field(k, v string)
	Fields(k string, vv []string)
}

// outboundHead returns the Host (hostPfx+host: the local mode's
// "localhost:" and the port, so the direct path writes it without
// building a string) and raw query the upstream gets for r, and r's
// token-carrying headers as the verifier leaves them, for outboundFields.
func (p *proxy) outboundHead(r *http.Request, t *target) (hostPfx, host, query string, stripped http.Header) {
	stripped, query = t.verifier.Stripped(r)
	switch {
	case t.url != nil:
		host = ""
	case t.host.rewrite:
		host = t.addr
	case t.host.local:
		_, port, err := net.SplitHostPort(t.addr)
		if err != nil {
			host = r.Host
			break
		}
		hostPfx, host = localhostPrefix, port
		// Only an Origin the gateway recognizes as the preview's own, and
		// only on an upgrade (the HMR socket a dev server guards): a plain
		// request's Origin stays, since Next.js compares a Server Action's
		// Origin with X-Forwarded-Host, the real host.
		if isUpgrade(r) && t.verifier.OwnOrigin(r) {
			stripped["Origin"] = []string{"http://" + localhostPrefix + port}
		}
	default:
		host = r.Host
	}
	return hostPfx, host, query, stripped
}

// outboundFields hands the fields the upstream gets for r to sink.
func (p *proxy) outboundFields(r *http.Request, stripped http.Header, sink outboundSink) {
	conn := wire.ConnectionTokens(r.Header)
	for k, vv := range r.Header {
		if k == "Host" || wire.HopByHop(k, conn) || forwardedHeader(k) || k == "X-Request-Id" {
			continue
		}
		if sv, ok := stripped[k]; ok {
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
	if p.g.tls || r.TLS != nil {
		sink.Field("X-Forwarded-Proto", "https")
	} else {
		sink.Field("X-Forwarded-Proto", "http")
	}
}

// forwardedHeader reports the client-sent forwarding headers the gateway
// replaces with its own.
func forwardedHeader(k string) bool {
	switch k {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}
