package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/records"
)

// Share links of a sandbox (#23): POST, GET /admin/sandboxes/{id}/links
// and DELETE /admin/sandboxes/{id}/links/{link}; settings.go says where
// they are kept.

// postLink is POST /admin/sandboxes/{id}/links.
type postLink struct {
	TTL  string `json:"ttl"`  // zero: auth.link_ttl
	Port int    `json:"port"` // zero: the template's port
	Path string `json:"path"` // zero: "/"
}

// linkPath is a link's path prefix ("" is "/"), ok if the link can open
// the URL it lands on: no query, and no dot segment, which the gateway
// never lets a link open (auth.RequestWithin) and every browser removes
// before it asks, so such a link would be refused from its first use.
func linkPath(p string) (string, bool) {
	if p == "" {
		p = "/"
	}
	u, err := url.Parse(p)
	ok := err == nil && strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && u.RawQuery == "" &&
		u.Fragment == "" && u.Path == p && len(p) <= 512 && auth.RequestWithin(u, p)
	return p, ok
}

// linkView is a link as listed: never its secret.
type linkView struct {
	ID      string     `json:"id"`
	URL     string     `json:"url,omitempty"` // only when minted
	Port    int        `json:"port"`
	Path    string     `json:"path"`
	Created time.Time  `json:"created"`
	Expires time.Time  `json:"expires"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

func (a *admin) createLink(w http.ResponseWriter, r *http.Request) {
	ss, id, tpl, ok := a.settingsOf(w, r)
	if !ok {
		return
	}
	var req postLink
	if r.ContentLength != 0 && !decodeBody(w, r, &req) {
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
	path, ok := linkPath(req.Path)
	if !ok {
		writeJSON(w, http.StatusBadRequest, errBody("path: want an absolute path such as /docs, without query or dot segments (. or ..)", "bad_request"))
		return
	}
	now := time.Now().UTC().Truncate(time.Second)
	exp := now.Add(ttl)
	lid, tok, digest, err := auth.NewLink(exp)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errBody("minting a link failed", "internal"))
		return
	}
	l := links.Link{ID: lid, Digest: digest, Port: port, Path: path, Created: now, Expires: exp}
	_, err = ss.Update(r.Context(), id, func(s *records.Settings) error { return records.AddLink(s, l) })
	if a.settingsFailed(w, err) {
		return
	}
	a.o.Log.InfoContext(r.Context(), "share link minted through admin API", "sandbox", id, "link", lid, "expires", exp)
	v := viewOfLink(l)
	v.URL = a.previewURL(id, port, tpl) + strings.TrimPrefix(path, "/") + "?" + auth.LinkParam + "=" + tok
	writeJSON(w, http.StatusCreated, v)
}

func viewOfLink(l links.Link) linkView {
	v := linkView{ID: l.ID, Port: l.Port, Path: l.Path, Created: l.Created, Expires: l.Expires}
	if !l.Revoked.IsZero() {
		t := l.Revoked
		v.Revoked = &t
	}
	return v
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

func (a *admin) listLinks(w http.ResponseWriter, r *http.Request) {
	ss, id, _, ok := a.settingsOf(w, r)
	if !ok {
		return
	}
	s, err := ss.Load(r.Context(), id)
	if a.settingsFailed(w, err) {
		return
	}
	out := make([]linkView, 0, len(s.Links))
	now := time.Now()
	for _, l := range s.Links {
		if l.Expires.After(now) {
			out = append(out, viewOfLink(l))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "links": out})
}

func (a *admin) deleteLink(w http.ResponseWriter, r *http.Request) {
	ss, id, _, ok := a.settingsOf(w, r)
	if !ok {
		return
	}
	lid := r.PathValue("link")
	err := revokeLink(r.Context(), ss, id, lid)
	if a.settingsFailed(w, err) {
		return
	}
	a.o.Log.InfoContext(r.Context(), "share link revoked through admin API", "sandbox", id, "link", lid)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "link": lid, "revoked": true})
}

// revokeLink marks sandbox id's link lid revoked (the API's DELETE and the
// admin page's button). A revoked link is kept until it expires, so the
// page it opens can say so; links.ErrNoLink if id has no link lid.
func revokeLink(ctx context.Context, ss SandboxSettings, id, lid string) error {
	now := time.Now().UTC()
	_, err := ss.Update(ctx, id, func(s *records.Settings) error {
		for i := range s.Links {
			if s.Links[i].ID == lid {
				ls := slices.Clone(s.Links)
				if ls[i].Revoked.IsZero() {
					ls[i].Revoked = now
				}
				s.Links = ls
				return nil
			}
		}
		return links.ErrNoLink
	})
	return err
}
