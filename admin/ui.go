package admin

import (
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
	"github.com/previewgate/previewgate/traffic"
)

// The admin web page (#16): server-rendered, no script, no external asset,
// under /ui/ on the admin listener. The admin token is exchanged once (a
// form POST) for a session cookie:
//   - the cookie is HttpOnly, SameSite=Strict, Path=/ui/, Secure over TLS,
//     and expires after sessionTTL; its value is an expiry, a nonce and an
//     HMAC keyed by the admin token, so no session is kept in memory and
//     changing admin_token ends every session;
//   - every POST carries a CSRF token (an HMAC of the cookie value, so it
//     is bound to the session) and must come from the page's own origin
//     (Origin, else Sec-Fetch-Site: same-origin; neither: refused);
//   - pages forbid framing and scripts by CSP.
// API tokens (api_tokens) do not open the page: it shows and edits config.

const (
	sessionCookie = "previewgate_admin"
	sessionTTL    = 12 * time.Hour
	uiLogLines    = 200
)

//go:embed ui.html
var uiHTML string

var uiTmpl = template.Must(template.New("ui").Funcs(template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return human(time.Since(t)) + " ago"
	},
	"dur":   human,
	"bytes": humanBytes,
	"clock": func(t time.Time) string { return t.Local().Format("15:04:05.000") },
	"args": func(csrf string, s any) map[string]any {
		return map[string]any{"CSRF": csrf, "S": s}
	},
}).Parse(uiHTML))

type ui struct{ a *admin }

func (u *ui) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /ui/{$}", u.home)
	mux.HandleFunc("POST /ui/login", u.login)
	mux.HandleFunc("POST /ui/logout", u.post(u.logout))
	mux.HandleFunc("GET /ui/sandboxes/{id}", u.session(u.sandbox))
	mux.HandleFunc("POST /ui/sandboxes/{id}/stop", u.post(u.op("stopped", func(r *http.Request, id string) error {
		return u.a.o.Sandboxes.Stop(r.Context(), id)
	})))
	mux.HandleFunc("POST /ui/sandboxes/{id}/remove", u.post(u.op("removed", func(r *http.Request, id string) error {
		return u.a.o.Sandboxes.Remove(r.Context(), id)
	})))
	mux.HandleFunc("POST /ui/config", u.post(u.config))
	u.trafficRoutes(mux)
}

func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: then Chromium sends Origin: null on POST
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

// pageData is everything the template shows. Sandbox output in Logs is
// sanitized by the manager and escaped by html/template.
type pageData struct {
	Login     bool
	Error     string   // a failure to show
	Notice    string   // a success to show
	Warnings  []string // what a valid config will fail at later
	CSRF      string
	Sandboxes []sandboxRow
	Pools     []poolRow
	Checks    []check
	Config    string
	CanApply  bool
	Path      string // the config file
	Sandbox   *sandboxRow
	Logs      []string
	Requests  []traffic.Request // the sandbox page: its last requests here
	Links     []adminapi.Link   // the sandbox page: its share links (unexpired)
	Now       time.Time
}

type sandboxRow struct {
	sandboxmgr.Info
	Uptime   time.Duration // running only
	IdleStop time.Duration // running only: until the reaper stops it (Info.Awake); <0: due
	Idle     bool          // IdleStop is known
	Traffic  *adminapi.Traffic
}

type poolRow struct {
	Template   string
	Ready, Max int
}

type check struct{ Name, Status string }

func (u *ui) render(w http.ResponseWriter, status int, d pageData) {
	pageHeaders(w)
	w.WriteHeader(status)
	d.Now = time.Now()
	if err := uiTmpl.Execute(w, d); err != nil {
		u.a.o.Log.Warn("admin page render", "err", err)
	}
}

// base fills the sandboxes, pools, checks and config for the main page.
func (u *ui) base(r *http.Request, session string) pageData {
	cfg := u.a.o.Config()
	d := pageData{CSRF: u.csrfToken(session), CanApply: u.a.o.Replace != nil, Path: cfg.Path}
	list, err := u.a.o.Sandboxes.List(r.Context())
	if err != nil {
		d.Error = "Listing sandboxes failed: " + err.Error()
	}
	slices.SortFunc(list, func(a, b sandboxmgr.Info) int { return strings.Compare(a.ID, b.ID) })
	for _, s := range list {
		d.Sandboxes = append(d.Sandboxes, u.rowOf(s))
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Templates)) {
		if n := cfg.Templates[name].Pool; n > 0 {
			d.Pools = append(d.Pools, poolRow{Template: name, Ready: u.a.o.Sandboxes.PoolSize(name), Max: n})
		}
	}
	rt := "ok"
	if err := u.a.o.Sandboxes.Ping(r.Context()); err != nil {
		rt = err.Error()
	}
	d.Checks = append(d.Checks, check{"Sandbox runtime", rt})
	if missing := u.a.missingImages(r.Context()); len(missing) > 0 {
		d.Checks = append(d.Checks, check{"Images", "missing: " + strings.Join(missing, ", ")})
	}
	if b, err := cfg.RedactedSource(); err == nil {
		d.Config = string(b)
	}
	return d
}

// rowOf adds uptime and time until the reaper's stop, as the manager
// planned it (Info.Awake: the reaper's own rules, open sockets included).
func (u *ui) rowOf(s sandboxmgr.Info) sandboxRow {
	row := sandboxRow{Info: s, Traffic: u.a.trafficOf(s.ID)}
	if s.State != "running" || s.StartedAt.IsZero() {
		return row
	}
	row.Uptime = time.Since(s.StartedAt)
	if s.Awake != nil && !s.Awake.StopsAt.IsZero() {
		row.IdleStop, row.Idle = time.Until(s.Awake.StopsAt), true
	}
	return row
}

// notices are the results a redirect after a POST may name (never text from
// the query: a link must not make the page say anything else).
var notices = map[string]string{"stopped": "Stopped sandbox %s.", "removed": "Removed sandbox %s.",
	"paused": "Paused sandbox %s.", "resumed": "Resumed sandbox %s.", "revoked": "Revoked a share link of sandbox %s."}

func (u *ui) home(w http.ResponseWriter, r *http.Request) {
	s, ok := u.validSession(r)
	if !ok {
		u.render(w, http.StatusOK, pageData{Login: true})
		return
	}
	d := u.base(r, s)
	if f, ok := notices[r.URL.Query().Get("done")]; ok && config.ValidID(r.URL.Query().Get("id")) {
		d.Notice = fmt.Sprintf(f, r.URL.Query().Get("id"))
	}
	u.render(w, http.StatusOK, d)
}

func (u *ui) sandbox(w http.ResponseWriter, r *http.Request, s string) {
	id := r.PathValue("id")
	if !config.ValidID(id) {
		http.Error(w, badIDMsg, http.StatusBadRequest)
		return
	}
	d := pageData{CSRF: u.csrfToken(s), Sandbox: &sandboxRow{Info: sandboxmgr.Info{ID: id}}}
	if list, err := u.a.o.Sandboxes.List(r.Context()); err == nil {
		for _, info := range list {
			if info.ID == id {
				row := u.rowOf(info)
				d.Sandbox = &row
			}
		}
	}
	lines, err := u.a.tailLogs(r.Context(), id, uiLogLines)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		d.Error = "No such sandbox."
	case err != nil:
		d.Error = "Reading logs failed: " + err.Error()
	}
	d.Logs = lines
	if u.a.o.Traffic != nil {
		d.Requests = u.a.o.Traffic.Last(id, 0)
	}
	d.Links = u.links(r.Context(), id)
	u.render(w, http.StatusOK, d)
}

func (u *ui) op(done string, do func(*http.Request, string) error) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, s string) {
		id := r.PathValue("id")
		if !config.ValidID(id) {
			http.Error(w, badIDMsg, http.StatusBadRequest)
			return
		}
		if err := do(r, id); err != nil {
			d := u.base(r, s)
			d.Error = fmt.Sprintf("Could not %s %s: %v", strings.TrimSuffix(strings.TrimSuffix(done, "ped"), "d"), id, err)
			u.render(w, http.StatusOK, d)
			return
		}
		u.a.o.Log.InfoContext(r.Context(), "sandbox "+done+" through admin page", "sandbox", id)
		http.Redirect(w, r, "/ui/?done="+done+"&id="+url.QueryEscape(id), http.StatusSeeOther)
	}
}

// config validates the submitted text and, for "apply", applies it only if
// it is valid. The page keeps the submitted text either way.
func (u *ui) config(w http.ResponseWriter, r *http.Request, s string) {
	text := r.PostFormValue("config")
	d := u.base(r, s)
	d.Config = text
	live := u.a.o.Config()
	name := live.Path
	if name == "" {
		name = "config"
	}
	parsed, _, err := config.ParseUpdate(name, []byte(text), live)
	if err != nil {
		d.Error = "Not valid; nothing changed:\n" + err.Error()
		u.render(w, http.StatusBadRequest, d)
		return
	}
	if r.PostFormValue("action") != "apply" {
		d.Notice = "Valid."
		d.Warnings = u.a.configWarnings(r.Context(), parsed, config.RestartNeeded(live, parsed))
		u.render(w, http.StatusOK, d)
		return
	}
	if u.a.o.Replace == nil {
		d.Error = "Running on the embedded default: there is no file to write; start with --config FILE."
		u.render(w, http.StatusConflict, d)
		return
	}
	restart, err := u.a.o.Replace([]byte(text))
	if err != nil {
		d.Error = "Not applied; nothing changed:\n" + err.Error()
		u.render(w, http.StatusBadRequest, d)
		return
	}
	u.a.o.Log.InfoContext(r.Context(), "config replaced through admin page", "path", live.Path, "restart_needed", restart)
	after := u.a.o.Config()
	d = u.base(r, s) // the applied config, as it now reads
	d.Notice = "Applied."
	if changed := changedKeys(live, after, restart); len(changed) > 0 {
		d.Notice += " Changed: " + strings.Join(changed, ", ") + "."
	} else {
		d.Notice += " Nothing changed."
	}
	d.Warnings = u.a.configWarnings(r.Context(), after, restart)
	u.render(w, http.StatusOK, d)
}

// human renders d roughly: 45s, 12m, 3h5m, 2d4h.
func human(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
	if neg {
		return "-" + s
	}
	return s
}
