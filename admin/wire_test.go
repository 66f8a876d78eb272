package admin_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/adminapi"
)

// newAdmin is admin.New(o) for a test: every JSON answer it gives under
// /admin/ is checked against package adminapi's types (checkAnswers), so
// the types the Go SDK, the CLI and docs/api.md rely on cannot drift from
// what the server sends.
func newAdmin(t *testing.T, o admin.Options) http.Handler {
	return checkAnswers(t, admin.New(o))
}

// answerTypes is the adminapi type of each call's 2xx answer; any other
// status answers an adminapi.Error.
var answerTypes = map[string]func() any{
	"GET /admin/sandboxes":                      func() any { return new([]adminapi.Sandbox) },
	"GET /admin/sandboxes/{id}":                 func() any { return new(adminapi.Sandbox) },
	"PUT /admin/sandboxes/{id}":                 func() any { return new(adminapi.PutResult) },
	"PATCH /admin/sandboxes/{id}":               func() any { return new(adminapi.Settings) },
	"DELETE /admin/sandboxes/{id}":              func() any { return new(adminapi.Removed) },
	"GET /admin/sandboxes/{id}/logs":            func() any { return new(adminapi.Logs) },
	"POST /admin/sandboxes/{id}/stop":           func() any { return new(adminapi.Stopped) },
	"POST /admin/sandboxes/{id}/pause":          func() any { return new(adminapi.Paused) },
	"POST /admin/sandboxes/{id}/resume":         func() any { return new(adminapi.Resumed) },
	"GET /admin/sandboxes/{id}/requests":        func() any { return new(adminapi.RequestLog) },
	"POST /admin/sandboxes/{id}/announce":       func() any { return new(adminapi.Announced) },
	"POST /admin/sandboxes/{id}/links":          func() any { return new(adminapi.Link) },
	"GET /admin/sandboxes/{id}/links":           func() any { return new(adminapi.Links) },
	"DELETE /admin/sandboxes/{id}/links/{link}": func() any { return new(adminapi.LinkRevoked) },
	"POST /admin/config/validate":               func() any { return new(adminapi.ConfigValidation) },
	"PUT /admin/config":                         func() any { return new(adminapi.ConfigApplied) },
}

// calls finds a request's entry in answerTypes.
var calls = func() *http.ServeMux {
	mux := http.NewServeMux()
	for pattern := range answerTypes {
		mux.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	}
	return mux
}()

// checkAnswers passes every request to h and checks its JSON answer under
// /admin/: it decodes into the call's adminapi type with unknown fields
// refused, as one value, and encodes back to the very bytes sent (the
// CLI's --json prints an answer so re-encoded).
func checkAnswers(t *testing.T, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &answerRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if !strings.HasPrefix(r.URL.Path, "/admin/") || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
			return
		}
		var v any = new(adminapi.Error)
		if rec.status/100 == 2 {
			_, pattern := calls.Handler(r)
			newV := answerTypes[pattern]
			if newV == nil {
				t.Errorf("%s %s answered %d JSON; adminapi has no type for it", r.Method, r.URL.Path, rec.status)
				return
			}
			v = newV()
		}
		if err := strictDecode(rec.body.Bytes(), v); err != nil {
			t.Errorf("%s %s answered %d %s, which is not its adminapi type %T: %v", r.Method, r.URL.Path, rec.status, rec.body.Bytes(), v, err)
			return
		}
		var again bytes.Buffer
		json.NewEncoder(&again).Encode(v)
		if !bytes.Equal(again.Bytes(), rec.body.Bytes()) {
			t.Errorf("%s %s: %T encodes\n%s\nnot as sent\n%s", r.Method, r.URL.Path, v, again.Bytes(), rec.body.Bytes())
		}
	})
}

// strictDecode decodes b, one JSON value, into v with unknown fields
// refused.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errMore
	}
	return nil
}

var errMore = errors.New("more than one JSON value")

// answerRecorder keeps what a handler writes (a JSON answer is small)
// besides writing it; Unwrap lets http.ResponseController reach the
// connection for the log stream's flushes and deadlines.
type answerRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (a *answerRecorder) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerRecorder) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if a.body.Len() < adminapi.MaxAnswer {
		a.body.Write(b)
	}
	return a.ResponseWriter.Write(b)
}

func (a *answerRecorder) Unwrap() http.ResponseWriter { return a.ResponseWriter }
