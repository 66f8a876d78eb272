package adminapi

import (
	"encoding/json"
	"errors"
	"strings"
)

// Error is the API's error object, {"error": "...", "code": "..."}, with
// the status it came with. A failed start (PUT, resume) carries its
// StartFailure too. The Client returns it as a *Error for every answer
// other than 2xx: errors.As finds it.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`  // e.g. not_found, bad_sandbox_id, busy (docs/api.md)
	Message string `json:"error"` // for people
	*StartFailure
	// Body is the answer as sent when it was a JSON error object; nil for
	// one that was not (a proxy's page), whose Message then says the
	// status.
	Body []byte `json:"-"`
}

// StartFailure is why a start failed: Reason as in Failure, the app's
// exit code when it exited, and its last output (nil when none was read).
type StartFailure struct {
	ExitCode *int     `json:"exit_code,omitempty"`
	Logs     []string `json:"logs"`
	Reason   string   `json:"reason"`
}

// Error is the message and its code, then a failed start's last output.
func (e *Error) Error() string {
	s := e.Message
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.StartFailure != nil && len(e.Logs) > 0 {
		s += "\nits last output:\n  " + strings.Join(e.Logs, "\n  ")
	}
	return s
}

// Errors of a call that got an answer the API does not give, and of a
// followed log.
var (
	// ErrBadAnswer: a 2xx answer that is not the call's (another program
	// on the port, a proxy).
	ErrBadAnswer = errors.New("unexpected answer")
	// ErrFollowFailed: the gateway said following the output failed.
	ErrFollowFailed = errors.New("following stopped")
	// ErrStreamBroken: the followed output broke off, or ended before the
	// gateway said the container's output had ended.
	ErrStreamBroken = errors.New("the stream broke")
)

// Nullable is a JSON value that may be absent, null, or a value: a PATCH
// field where null means "back to the default". The zero value is absent
// (omitted with omitzero).
type Nullable[T any] struct {
	set, null bool
	value     T
	err       error // the JSON value was not a T
}

// Value is v.
func Value[T any](v T) Nullable[T] { return Nullable[T]{set: true, value: v} }

// Null is null.
func Null[T any]() Nullable[T] { return Nullable[T]{set: true, null: true} }

// IsZero reports whether n is absent.
func (n Nullable[T]) IsZero() bool { return !n.set }

// IsNull reports whether n is null.
func (n Nullable[T]) IsNull() bool { return n.set && n.null }

// Get is n's value, ok when n is a value (neither absent, null nor
// malformed).
func (n Nullable[T]) Get() (v T, ok bool) { return n.value, n.set && !n.null && n.err == nil }

// Err says why the JSON value n was decoded from is not a T; nil if it
// is one (or null, or absent).
func (n Nullable[T]) Err() error { return n.err }

// MarshalJSON writes null or the value.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if n.null || !n.set {
		return []byte("null"), nil
	}
	return json.Marshal(n.value)
}

// UnmarshalJSON reads null or a T. A value that is not a T is kept as
// Err rather than failing the whole body: the server answers which field
// was wrong, in its own words.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Null[T]()
		return nil
	}
	var v T
	err := json.Unmarshal(b, &v)
	*n = Nullable[T]{set: true, value: v, err: err}
	return nil
}
