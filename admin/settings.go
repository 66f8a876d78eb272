package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Per-sandbox settings and share links (#23): PATCH /admin/sandboxes/{id}
// and /admin/sandboxes/{id}/links. The runtime keeps them (package
// records), so every replica and a restarted gateway see them; the API
// answers what was written. docs/links.md has the calls.

// SandboxSettings is what these calls need of the records
// (Options.Settings). With none kept they answer records.ErrNoRecords: 501.
type SandboxSettings interface {
	links.Keeper // its share links
	// Load reads id's settings from the store.
	Load(ctx context.Context, id string) (records.Settings, error)
	// Update changes them; the caller checked that the sandbox exists.
	Update(ctx context.Context, id string, fn func(*records.Settings) error) (records.Settings, error)
}

var _ SandboxSettings = (*records.Records)(nil)

// maxSettingsBody bounds a PATCH or POST .../links body.
const maxSettingsBody = 4 << 10

func (a *admin) settingsOf(w http.ResponseWriter, r *http.Request, id string) (SandboxSettings, *config.Template, bool) {
	ss := a.o.Settings
	// The runtime says whether it exists (this replica may not have seen
	// a sandbox made a moment ago, or one removed): none is a 404,
	// another scope's container under its name a 409 foreign_container,
	// as stop or DELETE say.
	s, err := a.o.Sandboxes.Get(r.Context(), id)
	if err != nil {
		writeSandboxError(w, err)
		return nil, nil, false
	}
	name := s.Template
	tpl := a.o.Config().Templates[name]
	if tpl == nil {
		writeJSON(w, http.StatusConflict, errBody(fmt.Sprintf("the sandbox's template %q is not configured", name), "unknown_template"))
		return nil, nil, false
	}
	return ss, tpl, true
}

// decodeJSON reads r's body, at most limit bytes, as one JSON object into
// v, or answers 400 saying what is wrong with it: an empty body, an
// unknown field, a key in another case than its field's or given twice
// (strictKeys), or anything after the object, which would otherwise be
// dropped unread ({"public":false}{"keep_up":"2h"} set only public).
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		err = strictKeys(body, v)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody("body: "+err.Error(), "bad_request"))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	switch {
	case errors.Is(err, io.EOF):
		err = errors.New("empty; want a JSON object")
	case err == nil && dec.Decode(&json.RawMessage{}) != io.EOF:
		err = errors.New("want one JSON object, and nothing after it")
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody("body: "+err.Error(), "bad_request"))
		return false
	}
	return true
}

func (a *admin) patchSandbox(w http.ResponseWriter, r *http.Request, id string) {
	ss, tpl, ok := a.settingsOf(w, r, id)
	if !ok {
		return
	}
	var req adminapi.SettingsPatch
	if !decodeJSON(w, r, &req, maxSettingsBody) {
		return
	}
	change, msg := settingsChange(req, tpl, time.Now())
	if msg != "" {
		writeJSON(w, http.StatusBadRequest, errBody(msg, "bad_request"))
		return
	}
	s, err := ss.Update(r.Context(), id, func(s *records.Settings) error { change(s); return nil })
	if a.settingsFailed(w, err) {
		return
	}
	a.o.Log.InfoContext(r.Context(), "sandbox settings changed through admin API", "sandbox", id)
	v := viewOf(id, tpl, s)
	if v.KeepUpUntil != nil {
		v.Note = a.keepUpNote(r.Context(), id, tpl)
	}
	writeJSON(w, http.StatusOK, v)
}

// keepUpNote says what sandbox id's keep-up means if it is not
// running: the reaper keeps only a running sandbox up, so the setting
// waits (kept by the runtime) until the sandbox next runs, and does not
// start it. "" when it runs (or its state cannot be read).
func (a *admin) keepUpNote(ctx context.Context, id string, tpl *config.Template) string {
	s, err := a.o.Sandboxes.Get(ctx, id)
	if err != nil || s.State == "running" {
		return ""
	}
	return fmt.Sprintf("sandbox %s is %s: the keep-up is kept, and holds from when it runs again (a request, PUT or resume wakes it) until keep_up_until; it does not start it, and while it is not running template %s's remove_after (%s) still counts",
		id, s.State, tpl.Name, tpl.RemoveAfter.D())
}

// settingsChange validates req against tpl at now and returns the change
// to make, or why it is refused. public: true or false sets it, null
// returns to the template's; keep_up (a duration from now) or
// keep_up_until (RFC 3339) keep it up, "0s" or null ends that.
func settingsChange(req adminapi.SettingsPatch, tpl *config.Template, now time.Time) (func(*records.Settings), string) {
	var pub *bool
	setPub := !req.Public.IsZero()
	if setPub && !req.Public.IsNull() {
		b, ok := req.Public.Get()
		if !ok {
			return nil, "public: want true, false or null"
		}
		pub = &b
	}
	var until time.Time
	setUntil := req.KeepUp != nil || !req.KeepUpUntil.IsZero()
	switch {
	case req.KeepUp != nil && !req.KeepUpUntil.IsZero():
		return nil, "give keep_up or keep_up_until, not both"
	case req.KeepUp != nil:
		d, err := time.ParseDuration(*req.KeepUp)
		if err != nil || d < 0 {
			return nil, "keep_up: want a duration such as 2h (0s ends it)"
		}
		if d > 0 {
			until = now.Add(d)
		}
	case !req.KeepUpUntil.IsZero() && !req.KeepUpUntil.IsNull():
		s, ok := req.KeepUpUntil.Get()
		t, err := time.Parse(time.RFC3339, s)
		if !ok || err != nil {
			return nil, "keep_up_until: want an RFC 3339 time such as 2026-01-02T15:04:05Z, or null"
		}
		if !t.After(now) {
			// Echoed back, it would read as a keep-up that holds.
			return nil, fmt.Sprintf("keep_up_until: %s is in the past (now: %s); give a later time, or null to end the keep-up",
				t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		until = t
	}
	if max := tpl.MaxKeepUp.D(); setUntil && until.Sub(now) > max {
		return nil, fmt.Sprintf("keep-up is at most %s from now (template %s's max_keep_up)", max, tpl.Name)
	}
	if !setPub && !setUntil {
		return nil, "nothing to change: give public, keep_up or keep_up_until"
	}
	return func(s *records.Settings) {
		if setPub {
			s.Public = pub
		}
		if setUntil {
			s.KeepUpUntil = until
		}
	}, ""
}

func viewOf(id string, tpl *config.Template, s records.Settings) adminapi.Settings {
	v := adminapi.Settings{ID: id, Public: tpl.Public, PublicSetting: s.Public, Links: len(s.Links)}
	if s.Public != nil {
		v.Public = *s.Public
	}
	if !s.KeepUpUntil.IsZero() {
		t := s.KeepUpUntil.UTC()
		v.KeepUpUntil = &t
	}
	return v
}

// settingsFailed answers err, if any.
func (a *admin) settingsFailed(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, runtime.ErrNotFound), errors.Is(err, runtime.ErrForeign):
		// ErrForeign: its name went to another scope's container since
		// this replica last saw it.
		writeSandboxError(w, err)
	case errors.Is(err, records.ErrNoRecords):
		writeJSON(w, http.StatusNotImplemented, errBody(err.Error(), "not_implemented"))
	case errors.Is(err, links.ErrTooManyLinks), errors.Is(err, records.ErrRecordSize):
		writeJSON(w, http.StatusConflict, errBody(err.Error(), "too_many_links"))
	case errors.Is(err, links.ErrNoLink):
		writeJSON(w, http.StatusNotFound, errBody("no such link", "not_found"))
	case errors.Is(err, records.ErrForeignRecord):
		writeJSON(w, http.StatusConflict, errBody(err.Error(), "foreign_record"))
	default:
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error(), "unavailable"))
	}
	return true
}
