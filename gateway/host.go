package gateway

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
)

// sandboxPrefix starts the first label of every sandbox host.
const sandboxPrefix = "sandbox-"

// hostname returns the request host lower-cased, without port and trailing dot.
func hostname(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(h)
}

// resolve maps a request host to what it addresses: a route, or a sandbox id
// under one of the domains. Foreign hosts get 404, malformed ids 400.
func (t *table) resolve(host string) (route, *httpError) {
	h := hostname(host)
	if rt, ok := t.routes[h]; ok {
		return *rt, nil
	}
	for _, d := range t.domains {
		if len(h) <= len(d)+1 || h[len(h)-len(d)-1] != '.' || h[len(h)-len(d):] != d {
			continue
		}
		label := h[:len(h)-len(d)-1]
		if !strings.HasPrefix(label, sandboxPrefix) || strings.IndexByte(label, '.') >= 0 {
			break
		}
		id := label[len(sandboxPrefix):]
		if !config.ValidID(id) {
			return route{}, &httpError{Status: http.StatusBadRequest, Code: "bad_sandbox_id",
				Msg: "Sandbox ids are 1–55 lowercase letters, digits and inner hyphens."}
		}
		return route{sandbox: id, template: t.defaultTemplate, public: t.defaultTemplate != nil && t.defaultTemplate.Public}, nil
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
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return false
		}
	}
	_, herr := g.table.Load().resolve(host)
	return herr == nil
}

// leanRequest reports whether r, a plain bodiless request, would be
// proxied straight to a running sandbox and is not a stream (SSE, the
// status endpoint): the lean HTTP/1.1 loop serves those (server.go),
// net/http everything else. The access check comes
// before the sandbox lookup, as on the request path: an unauthenticated
// request never looks up a sandbox. What it found goes into h, so the
// handler does not resolve and check the same request again.
func (g *Gateway) leanRequest(r *http.Request, h *leanHint) bool {
	if isLongLived(r) || isStatusRequest(r) {
		return false // streams: net/http notices a client leaving
	}
	t := g.table.Load()
	rt, herr := t.resolve(r.Host)
	if herr != nil || rt.sandbox == "" || rt.upstream != nil {
		return false
	}
	var res auth.Result
	if !rt.public {
		var err error
		if res, err = t.verifier.Check(r, rt.sandbox); err != nil {
			return false
		}
	}
	if _, ok := g.sb.Cached(rt.sandbox); !ok {
		return false
	}
	*h = leanHint{url: r.URL, t: t, rt: rt, res: res}
	return true
}

// leanHint is what leanRequest found for the request whose URL is url.
type leanHint struct {
	url *url.URL
	t   *table
	rt  route
	res auth.Result
}

type leanHintKey struct{}

// hintFor returns the lean loop's findings for r, or nil.
func hintFor(r *http.Request) *leanHint {
	if h, ok := r.Context().Value(leanHintKey{}).(*leanHint); ok && h.url == r.URL {
		return h
	}
	return nil
}
