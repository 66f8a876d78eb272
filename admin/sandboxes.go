package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The backend API for what products did by hand (#16): list sandboxes or
// read one, warm a sandbox before its user opens it, read or follow its
// output. Usable with the admin token or an api_tokens entry with scope
// "sandboxes".

func (a *admin) listSandboxes(w http.ResponseWriter, r *http.Request) {
	want, err := metadataFilter(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody(err.Error(), "bad_filter"))
		return
	}
	list, err := a.o.Sandboxes.List(r.Context())
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error(), "unavailable"))
		return
	}
	out := make([]adminapi.Sandbox, 0, len(list))
	now := time.Now()
	for _, s := range list {
		if sandboxmgr.MatchMetadata(s.Metadata, want) {
			out = append(out, sandboxOf(s, a.trafficOf(s.ID), now))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// getSandbox answers one sandbox exactly as the list has it, read from
// the runtime: 404 not_found if there is none, 409 foreign_container if
// its name is on another scope's container.
func (a *admin) getSandbox(w http.ResponseWriter, r *http.Request, id string) {
	s, err := a.o.Sandboxes.Get(r.Context(), id)
	if err != nil {
		writeSandboxError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxOf(s, a.trafficOf(s.ID), time.Now()))
}

// maxPutBody bounds a PUT /admin/sandboxes/{id} body (a template name and a
// few env values).
const maxPutBody = 64 << 10

// logWriteTimeout bounds each write of a followed log to the client.
const logWriteTimeout = 10 * time.Second

// putSandbox creates (or wakes) sandbox id from a template and waits until
// it is ready. Env applies when the container is created; an existing one
// keeps its own.
func (a *admin) putSandbox(w http.ResponseWriter, r *http.Request, id string) {
	var req adminapi.PutRequest // sandboxmgr.CheckMetadata says what metadata may be
	if r.ContentLength != 0 && !decodeJSON(w, r, &req, maxPutBody) {
		return
	}
	if err := sandboxmgr.CheckMetadata(req.Metadata); err != nil {
		writeJSON(w, http.StatusBadRequest, errBody(err.Error(), "bad_metadata"))
		return
	}
	cfg := a.o.Config()
	if req.Template == "" {
		req.Template = cfg.DefaultTemplate
	}
	base := cfg.Templates[req.Template]
	if base == nil {
		names := strings.Join(slices.Sorted(maps.Keys(cfg.Templates)), ", ")
		msg := fmt.Sprintf("unknown template %q (templates: %s)", req.Template, names)
		if req.Template == "" {
			msg = "no template given, and the config has no default_template (templates: " + names + ")"
		}
		writeJSON(w, http.StatusBadRequest, errBody(msg, "unknown_template"))
		return
	}
	tpl := *base
	if len(req.Env) > 0 {
		tpl.Env = maps.Clone(base.Env)
		if tpl.Env == nil {
			tpl.Env = make(map[string]string, len(req.Env))
		}
		for _, k := range slices.Sorted(maps.Keys(req.Env)) {
			if !slices.Contains(base.AllowEnv, k) {
				writeJSON(w, http.StatusBadRequest, errBody(fmt.Sprintf("env %q is not in template %s's allow_env", k, req.Template), "env_not_allowed"))
				return
			}
			tpl.Env[k] = req.Env[k]
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), wakeWait(&tpl))
	defer cancel()
	t0 := time.Now()
	var created atomic.Bool // this call's template, env and metadata made it
	ep, err := a.o.Sandboxes.EnsureWith(ctx, id, &tpl, sandboxmgr.Options{Metadata: req.Metadata,
		Created: func() { created.Store(true) }})
	if errors.Is(err, runtime.ErrNotFound) {
		// Only a removal while it started makes a create find nothing.
		writeJSON(w, http.StatusNotFound, errBody("sandbox "+id+" was removed while this call started it (a DELETE, or its container removed): nothing runs; PUT again to create it anew", "not_found"))
		return
	}
	if err != nil {
		writeSandboxError(w, err)
		return
	}
	a.o.Log.InfoContext(r.Context(), "sandbox warmed through admin API", "sandbox", id, "template", ep.Template, "created", created.Load())
	writeJSON(w, http.StatusOK, adminapi.PutResult{ID: id, Template: ep.Template, State: "running",
		Created: created.Load(), TookSeconds: time.Since(t0).Round(time.Millisecond).Seconds()})
}

// wakeWait bounds how long a call that wakes a sandbox (PUT, resume)
// waits for it: its template's ready timeout, which bounds the wake
// itself, plus wakeMargin. tpl nil (a sandbox whose template the config
// no longer has) wakes with the default ready timeout, as sandboxmgr's
// wake does. One rule for both calls: resume answered 504 after a fixed
// 5 min while the wake of a template with a longer ready timeout went on.
func wakeWait(tpl *config.Template) time.Duration {
	d := config.DefaultTemplateSettings().Ready.Timeout.D()
	if tpl != nil && tpl.Ready.Timeout > 0 {
		d = tpl.Ready.Timeout.D()
	}
	return d + wakeMargin
}

// wakeMargin is what a wake may take beyond its ready timeout: the ready
// clock stops while the wake waits for a start slot, and the answer is
// made after it.
const wakeMargin = 30 * time.Second

// writeSandboxError answers a failed Ensure, with the reason and output of
// a failed start.
func writeSandboxError(w http.ResponseWriter, err error) {
	var se *sandboxmgr.StartError
	switch {
	case errors.As(err, &se):
		// The same code and status a preview answers (gateway/errors.go).
		body := errBody(err.Error(), se.Code())
		body.StartFailure = &adminapi.StartFailure{Reason: se.Reason, Logs: se.Logs}
		if se.Reason == sandboxmgr.ReasonExited || se.Reason == sandboxmgr.ReasonCrashLoop {
			body.ExitCode = &se.ExitCode
		}
		status := http.StatusBadGateway
		if se.Reason == sandboxmgr.ReasonReadyTimeout {
			status = http.StatusGatewayTimeout
		}
		writeJSON(w, status, body)
	case errors.Is(err, sandboxmgr.ErrNotReady), errors.Is(err, context.DeadlineExceeded):
		writeJSON(w, http.StatusGatewayTimeout, errBody(err.Error(), "not_ready"))
	case errors.Is(err, runtime.ErrForeign):
		writeJSON(w, http.StatusConflict, errBody(err.Error(), "foreign_container"))
	case errors.Is(err, runtime.ErrNotFound):
		writeJSON(w, http.StatusNotFound, errBody("no such sandbox", "not_found"))
	case errors.Is(err, sandboxmgr.ErrCapacity):
		// What a preview answers at capacity (gateway/errors.go): a backend
		// must tell "retry later" from "the runtime is down", and when.
		w.Header().Set("Retry-After", "10")
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error()+"; retry after Retry-After", "busy"))
	default: // engine down
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, errBody(err.Error(), "unavailable"))
	}
}

// sandboxLogs answers the last ?tail= lines (default 100, at most
// sandboxmgr.MaxLogLines) of a sandbox's output as JSON, or with ?follow=1
// streams them and new ones as SSE, one JSON string per event, until the
// container stops or the client leaves. Lines are sanitized by the manager;
// JSON keeps each event on one data line whatever they hold.
func (a *admin) sandboxLogs(w http.ResponseWriter, r *http.Request, id string) {
	tail := 100
	if s := r.URL.Query().Get("tail"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, errBody("tail must be a number of lines", "bad_request"))
			return
		}
		tail = min(n, sandboxmgr.MaxLogLines)
	}
	follow := false
	if s := r.URL.Query().Get("follow"); s != "" {
		var err error
		if follow, err = strconv.ParseBool(s); err != nil {
			writeJSON(w, http.StatusBadRequest, errBody("follow must be 1 or 0", "bad_request"))
			return
		}
	}
	if !follow {
		lines, err := a.tailLogs(r.Context(), id, max(tail, 1)) // 1: still a 404 for no sandbox
		if err != nil {
			writeSandboxError(w, err)
			return
		}
		if lines == nil || tail == 0 {
			lines = []string{} // ?tail=0 asks for none, as with follow
		}
		writeJSON(w, http.StatusOK, adminapi.Logs{ID: id, Lines: lines})
		return
	}
	// Answer 404 and the like as JSON before the stream starts.
	s, err := a.o.Sandboxes.Get(r.Context(), id)
	if err == nil {
		_, err = sandboxmgr.TailLogs(r.Context(), a.o.Logs, s.Container, 1)
	}
	if err != nil {
		writeSandboxError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	startSSE(w)
	_ = rc.Flush()
	err = sandboxmgr.FollowLogs(r.Context(), a.o.Logs, s.Container, tail, func(line string) error {
		b, _ := json.Marshal(line)
		_ = rc.SetWriteDeadline(time.Now().Add(logWriteTimeout))
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	})
	if r.Context().Err() != nil {
		return
	}
	_ = rc.SetWriteDeadline(time.Now().Add(logWriteTimeout))
	if err != nil {
		b, _ := json.Marshal(err.Error())
		fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
		return
	}
	fmt.Fprint(w, "event: end\ndata: {}\n\n") // the container stopped
}

// tailLogs is sandbox id's last tail lines of output, sanitized, after the
// runtime said it is this gateway's (Get).
func (a *admin) tailLogs(ctx context.Context, id string, tail int) ([]string, error) {
	s, err := a.o.Sandboxes.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return sandboxmgr.TailLogs(ctx, a.o.Logs, s.Container, tail)
}

func startSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
}
