package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/previewgate/previewgate/config"
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

// hostOnly is hostname of a host NormalizeHost returned (checked and
// lower-cased once per request: resolve): without its port, one trailing
// dot before the port, and the brackets of an IPv6 literal.
func hostOnly(n string) string {
	if i := strings.LastIndexByte(n, ':'); i >= 0 && !strings.Contains(n[i:], "]") {
		n = strings.TrimSuffix(n[:i], ".")
	}
	return strings.TrimSuffix(strings.TrimPrefix(n, "["), "]")
}

// hostPortValid reports whether n, a host NormalizeHost returned, has
// either no port or a decimal one from 1 to 65535 without a leading zero
// (RFC 9110 §4.2's authority, the way a browser writes it). The port is
// not otherwise used (a sandbox's port is in its label), so a host such
// as sandbox-x.<domain>:abc or :99999 must not be served as if the port
// were not there: it is no URL anybody was given.
func hostPortValid(n string) bool {
	i := strings.LastIndexByte(n, ':')
	if i < 0 || strings.Contains(n[i:], "]") {
		return true // no port (or an IPv6 literal without one)
	}
	p := n[i+1:]
	if len(p) == 0 || len(p) > 5 || p[0] == '0' {
		return false
	}
	v := 0
	for j := 0; j < len(p); j++ {
		if p[j] < '0' || p[j] > '9' {
			return false
		}
		v = v*10 + int(p[j]-'0')
	}
	return v <= 65535
}

// resolve maps a request host to what it addresses: a route, or a sandbox id
// under one of the domains. Foreign hosts get 404, malformed ids 400.
//
// A host with a byte outside printable ASCII is 400 before any case
// folding; config.NormalizeHost and config.SandboxPortFromHost hold the rule,
// shared with certificates and config validation.
func (t *table) resolve(host string) (route, *httpError) {
	n, ok := config.NormalizeHost(host)
	if !ok {
		return route{}, &httpError{Status: http.StatusBadRequest, Code: "bad_host",
			Msg: "The host name is not valid."}
	}
	if !hostPortValid(n) {
		return route{}, &httpError{Status: http.StatusBadRequest, Code: "bad_host",
			Msg: "The port in the host is not a number from 1 to 65535."}
	}
	h := hostOnly(n)
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
// of the live config. It is the on-demand TLS decision: no certificate is
// requested for anything else.
// Non-ASCII names are refused before any case folding (the Kelvin sign
// lower-cases to "k").
func (g *Gateway) Serves(host string) bool {
	_, herr := g.table.Load().resolve(host) // refuses non-printable-ASCII first
	return herr == nil
}

// leanShape reports whether r may take the lean HTTP/1.1 loop (the
// server's Lean hook: NewServer): anything but a stream. SSE and the
// gateway's status stream stay with net/http, which notices a client
// leaving at once. It reads r's head only; what r is for is decided once,
// in ServeHTTP, whichever loop serves it.
func leanShape(r *http.Request) bool { return !isLongLived(r) && !isStatusRequest(r) }

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
