package admin

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/links"
)

// Share links of a sandbox (#23): POST, GET /admin/sandboxes/{id}/links
// and DELETE /admin/sandboxes/{id}/links/{link}; settings.go says where
// they are kept.

func (a *admin) createLink(w http.ResponseWriter, r *http.Request, id string) {
	ss, tpl, ok := a.settingsOf(w, r, id)
	if !ok {
		return
	}
	var req adminapi.LinkRequest
	if r.ContentLength != 0 && !decodeJSON(w, r, &req, maxSettingsBody) {
		return
	}
	cfg := a.o.Config()
	ttl := cfg.Auth.LinkTTL.D()
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 {
			writeJSON(w, http.StatusBadRequest, errBody("ttl: want a positive duration such as 10m", "bad_request"))
			return
		}
		ttl = d
	}
	if max := cfg.Auth.MaxLinkTTL.D(); ttl > max {
		writeJSON(w, http.StatusBadRequest, errBody(fmt.Sprintf("ttl: at most %s (auth.max_link_ttl)", max), "bad_request"))
		return
	}
	port := req.Port
	if port == 0 {
		port = tpl.Port
	}
	if !slices.Contains(tpl.Ports, port) && port != tpl.Port {
		writeJSON(w, http.StatusBadRequest, errBody(fmt.Sprintf("port %d is not among template %s's ports", port, tpl.Name), "bad_request"))
		return
	}
	if port != tpl.Port && len(id) > config.PortIDMax(port) {
		// Its URL would be <port>-sandbox-<id>, one DNS label over 63
		// characters: no name or certificate holds it, and the gateway
		// answers it 400 id_too_long_for_port. Refused here, not minted
		// with a URL that cannot open.
		writeJSON(w, http.StatusBadRequest, errBody(fmt.Sprintf(
			"port %d of sandbox %s has no preview address: %d-sandbox-<id> must fit one 63-character DNS label, so ids of at most %d characters have one for this port (this id has %d); a link for the template's port %d works",
			port, id, port, config.PortIDMax(port), len(id), tpl.Port), "id_too_long_for_port"))
		return
	}
	now := time.Now().UTC().Truncate(time.Second)
	exp := now.Add(ttl)
	l, tok, err := links.Mint(r.Context(), ss, id, port, req.Path, now, exp)
	if errors.Is(err, links.ErrPath) {
		writeJSON(w, http.StatusBadRequest, errBody(err.Error(), "bad_request"))
		return
	}
	if a.settingsFailed(w, err) {
		return
	}
	a.o.Log.InfoContext(r.Context(), "share link minted through admin API", "sandbox", id, "link", l.ID, "expires", exp)
	v := linkOf(l)
	v.URL = a.previewURL(id, port, tpl) + strings.TrimPrefix(l.Path, "/") + "?" + auth.LinkParam + "=" + tok
	writeJSON(w, http.StatusCreated, v)
}

// previewURL is the address of sandbox id's port ("/"-terminated).
func (a *admin) previewURL(id string, port int, tpl *config.Template) string {
	base := "http://" + config.SandboxPrefix + id + "." + a.o.Config().Domains[0] + "/"
	if a.o.PreviewURL != nil {
		base = a.o.PreviewURL(id)
	}
	if port != tpl.Port {
		base = strings.Replace(base, "://"+config.SandboxPrefix, "://"+strconv.Itoa(port)+"-"+config.SandboxPrefix, 1)
	}
	return base
}

func (a *admin) listLinks(w http.ResponseWriter, r *http.Request, id string) {
	ss, _, ok := a.settingsOf(w, r, id)
	if !ok {
		return
	}
	ls, err := links.List(r.Context(), ss, id, time.Now())
	if a.settingsFailed(w, err) {
		return
	}
	out := make([]adminapi.Link, 0, len(ls))
	for _, l := range ls {
		out = append(out, linkOf(l))
	}
	writeJSON(w, http.StatusOK, adminapi.Links{ID: id, Links: out})
}

func (a *admin) deleteLink(w http.ResponseWriter, r *http.Request, id string) {
	ss, _, ok := a.settingsOf(w, r, id)
	if !ok {
		return
	}
	lid := r.PathValue("link")
	err := links.Revoke(r.Context(), ss, id, lid, time.Now().UTC())
	if a.settingsFailed(w, err) {
		return
	}
	a.o.Log.InfoContext(r.Context(), "share link revoked through admin API", "sandbox", id, "link", lid)
	writeJSON(w, http.StatusOK, adminapi.LinkRevoked{ID: id, Link: lid, Revoked: true})
}
