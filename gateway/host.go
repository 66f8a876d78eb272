package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/h1server"
	"github.com/previewgate/previewgate/internal/outbound"
)

// hostname returns the request host without its port, as
// config.NormalizeHost normalizes it (lower-cased, without one trailing
// dot), and without the brackets of an IPv6 literal. A host with a byte
// outside printable ASCII gives "": resolve refuses it before asking.
func hostname(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	h, _ = config.NormalizeHost(h)
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// resolve maps a request host to what it addresses: a route, or a sandbox id
// under one of the domains. Foreign hosts get 404, malformed ids 400.
//
// A host with a byte outside printable ASCII is 400 before any case
// folding; config.NormalizeHost and config.SandboxFromHost hold the rule,
// shared with certificates and config validation.
func (t *table) resolve(host string) (route, *httpError) {
	if _, ok := config.NormalizeHost(host); !ok {
		return route{}, &httpError{Status: http.StatusBadRequest, Code: "bad_host",
			Msg: "The host name is not valid."}
	}
	h := hostname(host)
	if rt, ok := t.routes[h]; ok {
		return *rt, nil
	}
	switch id, port, ok, malformed := config.SandboxPortFromHost(h, t.domains); {
	case malformed && port > 0 && config.ValidID(id) && len(id) > config.PortIDMax(port):
		// The label <port>-sandbox-<id> would pass 63 characters: no DNS
		// name or certificate can hold it (#22).
		return route{}, &httpError{Status: http.StatusBadRequest, Code: "id_too_long_for_port",
			Msg: fmt.Sprintf("Port %d of this sandbox has no preview address: its id is %d characters, and a port address <port>-sandbox-<id> fits one 63-character DNS label only with ids of up to %d. Use an id of at most %d characters to reach its other ports.",
				port, len(id), config.PortIDMax(port), config.PortIDMax(65535))}
	case malformed && port < 0:
		return route{}, &httpError{Status: http.StatusBadRequest, Code: "bad_port",
			Msg: "A port address is <port>-sandbox-<id>, with the port 1–65535 and no leading zero."}
	case malformed:
		return route{}, &httpError{Status: http.StatusBadRequest, Code: "bad_sandbox_id",
			Msg: "Sandbox ids are 1–55 lowercase letters, digits and inner hyphens."}
	case ok:
		return route{sandbox: id, port: port, template: t.defaultTemplate}, nil
	}
	return route{}, &httpError{Status: http.StatusNotFound, Code: "unknown_host",
		Msg: "This host is not a preview served here."}
}

// portError refuses a port host for a port tpl does not list (404): the
// sandbox's own template, once it exists (policy.go).
func portError(rt route, tpl *config.Template) *httpError {
	if rt.port == 0 || tpl == nil || slices.Contains(tpl.Ports, rt.port) {
		return nil
	}
	return &httpError{Status: http.StatusNotFound, Code: "unknown_port",
		Msg: fmt.Sprintf("Port %d is not one this preview exposes (its template lists %v).", rt.port, tpl.Ports)}
}

// Serves reports whether host is one the gateway answers for: a configured
// route, sandbox-<valid id>.<domain> or <port>-sandbox-<valid id>.<domain>
// of the live config. It is the
// on-demand TLS decision: no certificate is requested for anything else.
// Non-ASCII names are refused before any case folding (the Kelvin sign
// lower-cases to "k").
func (g *Gateway) Serves(host string) bool {
	_, herr := g.table.Load().resolve(host) // refuses non-printable-ASCII first
	return herr == nil
}

// leanRequest reports whether r, a plain bodiless request, would be
// proxied straight to a running sandbox and is not a stream (SSE, the
// status endpoint): the lean HTTP/1.1 loop serves those (server.go),
// net/http everything else. The access check comes
// before the sandbox lookup, as on the request path: an unauthenticated
// request never looks up a sandbox. What it found goes into h, so the
// handler does not resolve and check the same request again. It is the
// server's Lean hook (NewServer); slot keeps one leanHint per connection.
func (g *Gateway) leanRequest(r *http.Request, slot *any) bool {
	if isLongLived(r) || isStatusRequest(r) {
		return false // streams: net/http notices a client leaving
	}
	if strings.Contains(r.URL.RawQuery, auth.LinkParam) {
		// A share link in the URL is checked even next to a valid token
		// (access), which the lean check below does not do.
		return false
	}
	t := g.table.Load()
	rt, herr := t.resolve(r.Host)
	if herr != nil || rt.sandbox == "" || rt.upstream != nil {
		return false
	}
	var res auth.Result
	pol := g.policy(t, rt)
	if !pol.public {
		var err error
		if res, err = t.verifier.Check(r, rt.sandbox); err != nil {
			return false
		}
	}
	if !g.sb.Sandbox(rt.sandbox).Snapshot().Ready {
		return false
	}
	h, _ := (*slot).(*leanHint)
	if h == nil {
		h = new(leanHint)
		*slot = h
	}
	*h = leanHint{t: t, rt: rt, pol: pol, res: res}
	return true
}

// leanHint is what leanRequest found for a request.
type leanHint struct {
	t   *table
	rt  route
	pol policy // the access check skipped the token only if pol.public
	res auth.Result
}

// hintFor returns the lean loop's findings for r, or nil.
func hintFor(r *http.Request) *leanHint {
	h, _ := h1server.Hint(r).(*leanHint)
	return h
}

// hostModeFor returns the identity of the app that tpl's host_header
// asks for on r (#22): the local mode (the default) presents the request
// as the app would see it on its own machine, preserve the preview's own
// Host, rewrite the container's address. internal/outbound applies it
// to the outbound head on every path, and maps a redirect back.
func hostModeFor(tpl *config.Template, r *http.Request) outbound.Host {
	switch tpl.HostHeader {
	case config.HostRewrite:
		return outbound.Host{Mode: outbound.Rewrite}
	case config.HostPreserve:
		return outbound.Host{Mode: outbound.Preserve}
	}
	return outbound.Host{Mode: outbound.Local, Preview: r.Host}
}
