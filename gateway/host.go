package gateway

import (
	"net/http"
	"strings"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/h1server"
)

// sandboxPrefix is config's, for the tests that build sandbox hosts.
const sandboxPrefix = config.SandboxPrefix

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
	switch id, ok, malformed := config.SandboxFromHost(h, t.domains); {
	case malformed:
		return route{}, &httpError{Status: http.StatusBadRequest, Code: "bad_sandbox_id",
			Msg: "Sandbox ids are 1–55 lowercase letters, digits and inner hyphens."}
	case ok:
		return route{sandbox: id, template: t.defaultTemplate}, nil
	}
	return route{}, &httpError{Status: http.StatusNotFound, Code: "unknown_host",
		Msg: "This host is not a preview served here."}
}

// Serves reports whether host is one the gateway answers for: a configured
// route or sandbox-<valid id>.<domain> of the live config. It is the
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
	if _, ok := g.sb.Cached(rt.sandbox); !ok {
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
