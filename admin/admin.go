// Package admin is previewgate's admin API: health and readiness, the
// Prometheus exposition, reading, validating and replacing the live config,
// and listing, stopping and removing sandboxes. /healthz and /readyz are
// open; everything else needs the configured admin token, and with none
// configured it stays closed (401).
//
// It reaches the rest of the gateway only through what Options hands it:
// the small Sandboxes interface it owns, functions that load and replace
// the config, a readiness check and a metrics handler. It must never import
// the gateway, never serve preview hosts, and never change the config
// except through Options.Replace (which validates the whole file first).
//
// Its JSON answers and request bodies are package adminapi's types, as
// they are: the domain's records (sandboxmgr.Info, the traffic log) are
// mapped onto them here (wire.go), never encoded themselves.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Sandboxes is what the admin API needs from the sandbox manager. The
// methods honor ctx.
type Sandboxes interface {
	List(ctx context.Context) ([]sandboxmgr.Info, error)
	// Get is one sandbox as List has it (runtime.ErrNotFound if
	// missing, runtime.ErrForeign if its name is another's).
	Get(ctx context.Context, id string) (sandboxmgr.Info, error)
	Stop(ctx context.Context, id string) error   // wraps runtime.ErrNotFound if missing
	Remove(ctx context.Context, id string) error // wraps runtime.ErrNotFound if missing
	Ping(ctx context.Context) error              // the sandbox runtime answers
	// Ensure creates or wakes id from tpl and waits until it is ready
	// (sandboxmgr errors; a failed start is a *sandboxmgr.StartError).
	Ensure(ctx context.Context, id string, tpl *config.Template) (sandboxmgr.Endpoint, error)
	// PoolSize is how many warm containers template has ready (no engine call).
	PoolSize(template string) int
	// EnsureWith is Ensure with options (metadata for a new sandbox).
	EnsureWith(ctx context.Context, id string, tpl *config.Template, opts sandboxmgr.Options) (sandboxmgr.Endpoint, error)
	// Pause freezes id (sandboxmgr.ErrNoPause where the runtime cannot,
	// ErrNotRunning if it is not running).
	Pause(ctx context.Context, id string) error
	// Resume wakes id without creating it and waits until it is ready.
	Resume(ctx context.Context, id string) (sandboxmgr.Endpoint, error)
}

// ImageChecker says whether the engine has an image (the runtime's
// Images capability): /readyz and a config's warnings name templates
// whose image it lacks.
type ImageChecker interface {
	Has(ctx context.Context, tag string) (bool, error)
}

var _ Sandboxes = (*sandboxmgr.Manager)(nil)

// Options configure the admin API.
type Options struct {
	// Config returns the live config (admin token, file path).
	Config func() *config.Config
	// Replace validates data as the new config file, applies it, writes it
	// atomically and stores it (config.Watcher.Replace), serialized with
	// file reloads. It returns the settings that need a restart. Nil means
	// there is no file (the embedded default): PUT answers 409.
	Replace func(data []byte) (restart []string, err error)
	// CheckFiles reports what the files a config names (keys,
	// certificates) would make the gateway refuse, as an ErrorList placed
	// at their keys; POST /admin/config/validate answers it as invalid.
	// Nil: files are not checked.
	CheckFiles func(*config.Config) error
	Sandboxes  Sandboxes
	// Settings are each sandbox's settings and share links (package
	// records); nil: none kept (those calls answer 501).
	Settings SandboxSettings
	// Logs reads a sandbox's output (the runtime's Logs capability); nil:
	// .../logs answers 501.
	Logs runtime.Logs
	// Images checks templates' images (the runtime's Images capability);
	// nil: not checked (the runtime pulls them).
	Images ImageChecker
	// Announce makes a sandbox id worth an on-demand certificate before
	// it exists (gateway.Announce); false for an invalid id. Nil: POST
	// .../announce answers 404.
	Announce func(id string) bool
	// Ready reports other readiness conditions (certificates); nil means ready.
	Ready func(ctx context.Context) error
	// Metrics serves /metrics; nil means 404.
	Metrics http.Handler
	// Traffic is this replica's per-sandbox request log; nil: none kept.
	Traffic Traffic
	Log     *slog.Logger
	// PreviewURL is sandbox id's preview address ("/"-terminated), for
	// share links; nil: http://sandbox-<id>.<first domain>/.
	PreviewURL func(id string) string
}

// maxConfigBytes bounds a PUT /admin/config body: the size of a config
// file (the parser refuses more, and deep nesting, itself).
const maxConfigBytes = config.MaxSize

type admin struct{ o Options }

// New returns the admin API handler. /healthz and /readyz are open;
// everything else needs `Authorization: Bearer <admin_token>`, and with no
// admin_token configured it is closed (401).
func New(o Options) http.Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Settings == nil {
		o.Settings = (*records.Records)(nil) // keeps none: 501
	}
	a := &admin{o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	if o.Metrics != nil {
		mux.Handle("GET /metrics", a.authed(o.Metrics.ServeHTTP))
	}
	mux.HandleFunc("GET /admin/config", a.authed(takes(a.getConfig)))
	mux.HandleFunc("PUT /admin/config", a.authed(takes(a.putConfig)))
	mux.HandleFunc("POST /admin/config/validate", a.authed(takes(a.validateConfig)))
	sbx := func(h func(http.ResponseWriter, *http.Request, string), params ...string) http.HandlerFunc {
		return a.scoped(config.APIScopeSandboxes, takes(withID(h), params...))
	}
	mux.HandleFunc("GET /admin/sandboxes", a.scoped(config.APIScopeSandboxes, a.listSandboxes)) // metadata.KEY filters (traffic.go)
	mux.HandleFunc("GET /admin/sandboxes/{id}", sbx(a.getSandbox))
	mux.HandleFunc("PUT /admin/sandboxes/{id}", sbx(a.putSandbox))
	mux.HandleFunc("GET /admin/sandboxes/{id}/logs", sbx(a.sandboxLogs, "tail", "follow"))
	mux.HandleFunc("POST /admin/sandboxes/{id}/stop", sbx(a.sandboxOp("stop", o.Sandboxes.Stop,
		func(id string) any { return adminapi.Stopped{ID: id, Stop: true} })))
	mux.HandleFunc("POST /admin/sandboxes/{id}/pause", sbx(a.pauseSandbox))
	mux.HandleFunc("POST /admin/sandboxes/{id}/resume", sbx(a.resumeSandbox))
	mux.HandleFunc("GET /admin/sandboxes/{id}/requests", sbx(a.sandboxRequests, "n"))
	mux.HandleFunc("POST /admin/sandboxes/{id}/announce", a.scoped(config.APIScopeSandboxes, takes(a.announce)))
	mux.HandleFunc("DELETE /admin/sandboxes/{id}", sbx(a.sandboxOp("remove", a.removeSandbox,
		func(id string) any { return adminapi.Removed{ID: id, Remove: true} })))
	mux.HandleFunc("PATCH /admin/sandboxes/{id}", sbx(a.patchSandbox)) // settings (links.go)
	mux.HandleFunc("POST /admin/sandboxes/{id}/links", sbx(a.createLink))
	mux.HandleFunc("GET /admin/sandboxes/{id}/links", sbx(a.listLinks))
	mux.HandleFunc("DELETE /admin/sandboxes/{id}/links/{link}", sbx(a.deleteLink))
	(&ui{a: a}).routes(mux)
	return jsonMisses(mux)
}

// takes answers 400 bad_param to a query parameter h does not read, or a
// query that does not parse: a misspelt ?folow=1, or a ?force=1 the call
// does not have, must not be answered as if it were understood (#24:
// nothing fails silently). Behind the token check, so that a caller
// without one learns nothing from it.
func takes(h http.HandlerFunc, params ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if msg := unknownParam(r.URL.RawQuery, params); msg != "" {
			writeJSON(w, http.StatusBadRequest, errBody(msg, "bad_param"))
			return
		}
		h(w, r)
	}
}

// unknownParam says what is wrong with query for a call taking params,
// or "".
func unknownParam(query string, params []string) string {
	q, err := url.ParseQuery(query)
	if err != nil {
		return "the query does not parse: " + err.Error()
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(params, k) {
			takes := "no query parameters"
			if len(params) > 0 {
				takes = strings.Join(params, ", ")
			}
			return fmt.Sprintf("unknown query parameter %q (this call takes %s)", k, takes)
		}
	}
	return ""
}

// authed admits the admin token only.
func (a *admin) authed(h http.HandlerFunc) http.HandlerFunc { return a.scoped("", h) }

// scoped admits the admin token, or (scope non-empty) an api_tokens entry
// holding scope. Every token is compared in constant time.
func (a *admin) scoped(scope string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cfg := a.o.Config()
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		allowed := ok && tokenEqual(got, string(cfg.AdminToken))
		if ok && scope != "" {
			for _, t := range cfg.APITokens {
				if tokenEqual(got, string(t.Token)) && slices.Contains(t.Scopes, scope) {
					allowed = true
				}
			}
		}
		if !allowed {
			w.Header().Set("WWW-Authenticate", `Bearer realm="previewgate-admin"`)
			msg := "admin token required"
			if scope != "" {
				msg = "admin token, or an API token with the " + scope + " scope, required"
			}
			if cfg.AdminToken == "" && (scope == "" || len(cfg.APITokens) == 0) {
				// No token could open this call: say so rather than
				// leave the operator trying tokens.
				msg = "this gateway has no admin_token (and no api_tokens for this call): the admin API refuses every call; set admin_token in the config"
			}
			writeJSON(w, http.StatusUnauthorized, errBody(msg, "unauthorized"))
			return
		}
		h(w, r)
	}
}

// tokenEqual compares a presented token with a configured one; an empty
// configured token matches nothing.
func tokenEqual(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (a *admin) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{"runtime": "ok", "certificates": "ok"}
	status := http.StatusOK
	if err := a.o.Sandboxes.Ping(ctx); err != nil {
		checks["runtime"], status = err.Error(), http.StatusServiceUnavailable
	}
	if a.o.Ready != nil {
		if err := a.o.Ready(ctx); err != nil {
			checks["certificates"], status = err.Error(), http.StatusServiceUnavailable
		}
	}
	// A missing image fails only its template's sandboxes: reported, not
	// a reason to take the whole gateway out of rotation (#16).
	if missing := a.missingImages(ctx); len(missing) > 0 {
		checks["images"] = "missing: " + strings.Join(missing, ", ")
	} else if checks["runtime"] == "ok" {
		checks["images"] = "ok"
	}
	writeJSON(w, status, checks)
}

func (a *admin) getConfig(w http.ResponseWriter, r *http.Request) {
	b, err := a.o.Config().RedactedSource()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errBody(err.Error(), "internal"))
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(b)
}

// readConfig reads a config file from the request body, or answers why
// it cannot.
func readConfig(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxConfigBytes))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, errBody("config too large or unreadable: "+err.Error(), "bad_request"))
	}
	return body, err == nil
}

// parseBody decodes a config from the request body, named after the live
// file so errors read FILE:LINE:COL. REDACTED secrets and env values stand
// for the running ones, as in PUT.
func (a *admin) parseBody(w http.ResponseWriter, r *http.Request) (*config.Config, bool) {
	body, ok := readConfig(w, r)
	if !ok {
		return nil, false
	}
	name := a.o.Config().Path
	if name == "" {
		name = "request"
	}
	cfg, _, err := config.ParseUpdate(name, body, a.o.Config())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody(err.Error(), "invalid_config"))
		return nil, false
	}
	cfg.Path = a.o.Config().Path
	return cfg, true
}

func (a *admin) validateConfig(w http.ResponseWriter, r *http.Request) {
	if cfg, ok := a.parseBody(w, r); ok {
		if a.o.CheckFiles != nil {
			if err := a.o.CheckFiles(cfg); err != nil {
				writeJSON(w, http.StatusBadRequest, errBody(err.Error(), "invalid_config"))
				return
			}
		}
		writeJSON(w, http.StatusOK, adminapi.ConfigValidation{Valid: true,
			Changed:  changedKeys(a.o.Config(), cfg, nil),
			Warnings: a.configWarnings(r.Context(), cfg, config.RestartNeeded(a.o.Config(), cfg))})
	}
}

func (a *admin) putConfig(w http.ResponseWriter, r *http.Request) {
	if a.o.Replace == nil {
		writeJSON(w, http.StatusConflict, errBody("running on the embedded default: there is no file to write; start with --config FILE", "no_config_file"))
		return
	}
	body, ok := readConfig(w, r)
	if !ok {
		return
	}
	before := a.o.Config()
	restart, err := a.o.Replace(body)
	var invalid config.ErrorList
	switch {
	case errors.As(err, &invalid):
		writeJSON(w, http.StatusBadRequest, errBody(err.Error(), "invalid_config"))
		return
	case err != nil:
		// Valid YAML that could not be applied (e.g. an unreadable key file):
		// nothing changed either.
		writeJSON(w, http.StatusBadRequest, errBody(err.Error(), "config_not_applied"))
		return
	}
	after := a.o.Config()
	changed := changedKeys(before, after, restart)
	warnings := a.configWarnings(r.Context(), after, restart)
	if restart == nil {
		restart = []string{} // [] in the answer and the log, as changed is
	}
	a.o.Log.InfoContext(r.Context(), "config replaced through admin API", "path", after.Path, "changed", changed, "restart_needed", restart, "warnings", len(warnings))
	writeJSON(w, http.StatusOK, adminapi.ConfigApplied{Applied: true, Changed: changed, RestartNeeded: restart, Warnings: warnings})
}

// sandboxOp answers op on {id} with done(id) (adminapi.Stopped,
// adminapi.Removed).
func (a *admin) sandboxOp(name string, op func(context.Context, string) error, done func(id string) any) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, id string) {
		err := op(r.Context(), id)
		switch {
		case err != nil:
			// 404, 409 foreign_container (never touched: not "unavailable",
			// which a backend would retry), 503 with Retry-After.
			writeSandboxError(w, err)
		default:
			a.o.Log.InfoContext(r.Context(), "sandbox "+name+" through admin API", "sandbox", id)
			writeJSON(w, http.StatusOK, done(id))
		}
	}
}

// withID hands h the call's {id}, once it is a valid sandbox id: a
// malformed one is answered 400 bad_sandbox_id.
func withID(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !config.ValidID(id) {
			writeJSON(w, http.StatusBadRequest, errBody(badIDMsg, "bad_sandbox_id"))
			return
		}
		h(w, r, id)
	}
}

// badIDMsg answers a malformed sandbox id with the rule it broke: a
// backend sending an uppercase UUID learns what to send instead.
var badIDMsg = fmt.Sprintf("malformed sandbox id (allowed: lowercase letters, digits, inner hyphens, 1-%d characters)", config.MaxIDLen)

// errBody is the API's error object.
func errBody(msg, code string) *adminapi.Error {
	return &adminapi.Error{Code: code, Message: msg}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// missingImages names the templates (as "name (image)") whose image the
// engine lacks; nil when all are there or it cannot tell.
func (a *admin) missingImages(ctx context.Context) []string {
	ic := a.o.Images
	if ic == nil {
		return nil
	}
	cfg := a.o.Config()
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Templates)) {
		img := cfg.Templates[name].Image
		if has, err := ic.Has(ctx, img); err == nil && !has {
			out = append(out, name+" ("+img+")")
		}
	}
	return out
}
