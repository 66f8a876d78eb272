package outbound

import (
	"net/http"
	"strings"
)

// The way back. Previews share a parent domain, which is rarely on the
// Public Suffix List (docs/tls.md asks for it, and inclusion takes
// weeks): to a browser, every preview and often the product that embeds
// them are one site. What a sandbox's answer could do to that whole site
// is cut to its own host, on every path that carries an answer to the
// client (the exchange, an upgrade's refusal and its 101), by Response:
//
//   - a Set-Cookie loses its Domain attribute: the cookie stays on the
//     preview's own host instead of reaching every other preview (cookie
//     tossing: another preview's app, or the product, reading a value
//     this one chose);
//   - Clear-Site-Data loses "cookies" ("*" becomes the directives that
//     clear only the origin's own data): a browser clears cookies for the
//     whole registrable domain, every other preview's and the gateway's
//     token cookies with them;
//   - X-Request-Id is the gateway's: the id users quote to the operator
//     is not one the app chose.
//
// A fixed upstream (Mode Upstream) is the operator's own service: only
// the request id rule applies to it.

// Response applies the way back's rules to hdr, a sandbox's answer about
// to go to the client, and maps its Location (MapLocation). id is the
// gateway's X-Request-Id for the answer; nil removes the app's and leaves
// the caller's own header to carry the gateway's.
func (h Host) Response(hdr http.Header, addr string, id []string) {
	if id != nil {
		hdr["X-Request-Id"] = id
	} else {
		delete(hdr, "X-Request-Id")
	}
	if h.Mode == Upstream {
		return
	}
	h.MapLocation(hdr, addr)
	if vv := hdr["Set-Cookie"]; len(vv) > 0 {
		for i, v := range vv {
			vv[i] = HostOnlyCookie(v)
		}
	}
	if vv, ok := hdr["Clear-Site-Data"]; ok {
		if v := OwnSiteData(vv); v != "" {
			hdr["Clear-Site-Data"] = []string{v}
		} else {
			delete(hdr, "Clear-Site-Data")
		}
	}
}

// HostOnlyCookie returns a Set-Cookie value without its Domain
// attributes; the cookie's own name and value are never touched.
func HostOnlyCookie(v string) string {
	if !containsFold(v, "domain") {
		return v
	}
	parts := strings.Split(v, ";")
	kept := parts[:1]
	for _, p := range parts[1:] {
		name, _, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(name), "domain") {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ";")
}

// originDirectives are what "*" clears that is the origin's own.
const originDirectives = `"cache", "clientHints", "storage", "executionContexts"`

// OwnSiteData returns the Clear-Site-Data directives of vv that clear
// only the origin's own data, joined ("" if none): "cookies" goes, "*"
// becomes originDirectives. A directive is matched without its quotes and
// case, so no spelling a browser might accept gets through.
func OwnSiteData(vv []string) string {
	var out []string
	for _, v := range vv {
		for _, d := range strings.Split(v, ",") {
			d = strings.TrimSpace(d)
			switch strings.ToLower(strings.Trim(d, `"`)) {
			case "cookies":
			case "*":
				out = append(out, originDirectives)
			case "":
			default:
				out = append(out, d)
			}
		}
	}
	return strings.Join(out, ", ")
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// in any case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
