// Package adminapi is the Go SDK of previewgate's admin API: the request
// and answer types of its calls and a typed Client (docs/api.md lists the
// calls; a backend imports this package to make them).
//
// These types are the wire shape itself: the admin server (package
// admin) encodes exactly them, the CLI and the tests decode them, and the
// server's tests decode every answer they see into them with unknown
// fields refused, so the two cannot drift. A field's JSON name and its
// omitempty are the API's; what a gateway stores is another type.
package adminapi

import "time"

// Sandbox is one sandbox: an element of GET /admin/sandboxes, and the
// answer of GET /admin/sandboxes/{id}.
type Sandbox struct {
	ID        string `json:"id"`
	Template  string `json:"template"`
	State     string `json:"state"` // running | paused | exited | created | ...
	Container string `json:"container"`
	// LastActivity is the last request or socket activity this replica
	// knows of; StartedAt when the running instance started.
	LastActivity time.Time `json:"last_activity,omitzero"`
	StartedAt    time.Time `json:"started_at,omitzero"`
	// LastFailure is its last failed start as this replica saw it; nil if
	// it saw none.
	LastFailure *Failure `json:"last_failure,omitempty"`
	// Metadata is what the sandbox was created with (PutRequest.Metadata).
	Metadata map[string]string `json:"metadata,omitempty"`
	// OpenSockets, Wakes and WakeSeconds are this replica's: its open
	// WebSockets and SSE streams, and the wakes it made (their total
	// time), since it started.
	OpenSockets int     `json:"open_sockets"`
	Wakes       int64   `json:"wakes"`
	WakeSeconds float64 `json:"wake_seconds"`
	// Awake says what keeps a running sandbox up and when the idle reaper
	// stops it; nil unless running.
	Awake *Awake `json:"awake,omitempty"`
	// PublicSetting is its own public setting, nil when its template's
	// applies; KeepUpUntil its keep-up; LiveLinks how many of its share
	// links open it now (neither expired nor revoked).
	PublicSetting *bool     `json:"public_setting,omitempty"`
	KeepUpUntil   time.Time `json:"keep_up_until,omitzero"`
	LiveLinks     int       `json:"live_links"`
	// UptimeSeconds is how long a running sandbox has run.
	UptimeSeconds float64 `json:"uptime_seconds,omitempty"`
	// Traffic is its counters through the replica that answers; nil if
	// that replica recorded none.
	Traffic *Traffic `json:"traffic,omitempty"`
}

// Failure is a failed start: why ("exited", "crash_loop", "ready_timeout",
// "image_missing"), the app's exit code when it exited, and when.
type Failure struct {
	Reason   string    `json:"reason"`
	ExitCode *int      `json:"exit_code,omitempty"`
	At       time.Time `json:"at"`
}

// Awake explains a running sandbox's idle plan as the answering replica
// sees it.
type Awake struct {
	// Reasons, in words, each a fact: open sockets, the last request, the
	// runtime's shared activity, a keep-up time. Summary is the main one
	// in a few words.
	Reasons     []string `json:"reasons"`
	Summary     string   `json:"summary"`
	OpenSockets int      `json:"open_sockets"`
	// LastActivity is the latest activity the replica knows of, its own
	// or another replica's (SharedActivity, as the runtime reported it).
	LastActivity   time.Time `json:"last_activity,omitzero"`
	SharedActivity time.Time `json:"shared_activity,omitzero"`
	// KeepUntil is the sandbox's keep-up time; zero: none.
	KeepUntil time.Time `json:"keep_until,omitzero"`
	// IdleFrom is the moment idleness counts from, Rule the setting that
	// applies (idle_timeout, max_socket_idle), LimitSeconds its value.
	IdleFrom     time.Time `json:"idle_from"`
	Rule         string    `json:"rule"`
	LimitSeconds float64   `json:"limit_seconds"`
	// StopsAt is the earliest the reaper acts, with Action "stop" or
	// "pause", unless a request comes first.
	StopsAt time.Time `json:"stops_at,omitzero"`
	Action  string    `json:"action,omitempty"`
}

// Traffic is a sandbox's counters through one replica.
type Traffic struct {
	Replica string `json:"replica"`
	Counters
}

// Counters are a sandbox's totals since a replica began tracking it.
type Counters struct {
	Requests int64     `json:"requests"`
	BytesIn  int64     `json:"bytes_in"`
	BytesOut int64     `json:"bytes_out"`
	Errors   int64     `json:"errors"` // status 500 and above (and 499)
	Since    time.Time `json:"since"`  // when tracking began
	Last     time.Time `json:"last_request,omitzero"`
}

// RequestLog answers GET /admin/sandboxes/{id}/requests: the sandbox's
// last requests through the replica that answers, newest first.
// Replica and Counters are absent where the gateway keeps no log.
type RequestLog struct {
	Counters *Counters `json:"counters,omitempty"`
	ID       string    `json:"id"`
	Replica  string    `json:"replica,omitempty"`
	Requests []Request `json:"requests"`
}

// Request is one finished request as a replica recorded it: never its
// query, headers or body.
type Request struct {
	Time     time.Time `json:"time"`
	Method   string    `json:"method"`
	Path     string    `json:"path"`
	Status   int       `json:"status"`
	Millis   float64   `json:"duration_ms"`
	BytesIn  int64     `json:"bytes_in"`
	BytesOut int64     `json:"bytes_out"`
	Client   string    `json:"client,omitempty"`
}

// PutRequest is the body of PUT /admin/sandboxes/{id} (create or wake).
// All of it applies only when the call creates the sandbox; an existing
// one keeps its own.
type PutRequest struct {
	Template string            `json:"template,omitempty"` // empty: default_template
	Env      map[string]string `json:"env,omitempty"`      // names in the template's allow_env only
	Metadata map[string]string `json:"metadata,omitempty"`
}

// PutResult answers PUT /admin/sandboxes/{id} once the app answers.
// Created says whether this call created it, with its body.
type PutResult struct {
	Created     bool    `json:"created"`
	ID          string  `json:"id"`
	State       string  `json:"state"`
	Template    string  `json:"template"`
	TookSeconds float64 `json:"took_seconds"`
}

// Resumed answers POST /admin/sandboxes/{id}/resume once the app answers.
type Resumed struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Template string `json:"template"`
}

// Stopped answers POST /admin/sandboxes/{id}/stop.
type Stopped struct {
	ID   string `json:"id"`
	Stop bool   `json:"stop"`
}

// Removed answers DELETE /admin/sandboxes/{id}.
type Removed struct {
	ID     string `json:"id"`
	Remove bool   `json:"remove"`
}

// Paused answers POST /admin/sandboxes/{id}/pause.
type Paused struct {
	ID     string `json:"id"`
	Paused bool   `json:"paused"`
}

// Logs answers GET /admin/sandboxes/{id}/logs: the last lines of its
// output, sanitized.
type Logs struct {
	ID    string   `json:"id"`
	Lines []string `json:"lines"`
}

// SettingsPatch is the body of PATCH /admin/sandboxes/{id}: only the
// fields given change.
type SettingsPatch struct {
	// Public: true or false sets it; null returns to the template's.
	Public Nullable[bool] `json:"public,omitzero"`
	// KeepUp keeps it running this long from now whatever its traffic,
	// a duration such as "2h"; "0s" ends a keep-up.
	KeepUp *string `json:"keep_up,omitempty"`
	// KeepUpUntil is the same until an RFC 3339 time; null ends it.
	KeepUpUntil Nullable[string] `json:"keep_up_until,omitzero"`
}

// Settings answers PATCH /admin/sandboxes/{id}: the sandbox's settings
// as written.
type Settings struct {
	ID string `json:"id"`
	// Public is the effective value; PublicSetting the sandbox's own (nil:
	// its template's applies).
	Public        bool       `json:"public"`
	PublicSetting *bool      `json:"public_setting,omitempty"`
	KeepUpUntil   *time.Time `json:"keep_up_until,omitempty"`
	Links         int        `json:"links"`
	// Note says when a keep-up set on a sandbox that is not running
	// applies: it is kept, and holds once the sandbox runs again.
	Note string `json:"note,omitempty"`
}

// LinkRequest is the body of POST /admin/sandboxes/{id}/links.
type LinkRequest struct {
	TTL  string `json:"ttl,omitempty"`  // e.g. "10m"; empty: auth.link_ttl
	Port int    `json:"port,omitempty"` // zero: the template's port
	Path string `json:"path,omitempty"` // the path prefix it opens; empty: "/"
}

// Link is a share link. URL, which holds its secret, is only in the
// answer that minted it.
type Link struct {
	ID      string     `json:"id"`
	URL     string     `json:"url,omitempty"`
	Port    int        `json:"port"`
	Path    string     `json:"path"`
	Created time.Time  `json:"created"`
	Expires time.Time  `json:"expires"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// Links answers GET /admin/sandboxes/{id}/links: its links, revoked ones
// until they would have expired.
type Links struct {
	ID    string `json:"id"`
	Links []Link `json:"links"`
}

// LinkRevoked answers DELETE /admin/sandboxes/{id}/links/{link}.
type LinkRevoked struct {
	ID      string `json:"id"`
	Link    string `json:"link"`
	Revoked bool   `json:"revoked"`
}

// Announced answers POST /admin/sandboxes/{id}/announce.
type Announced struct {
	Announced  string `json:"announced"`
	ForSeconds int    `json:"for_seconds"`
}

// ConfigValidation answers POST /admin/config/validate for a valid
// config: the keys it would change, and what is valid but will fail
// later (a missing image, a setting that waits for a restart).
type ConfigValidation struct {
	Changed  []string `json:"changed"`
	Valid    bool     `json:"valid"`
	Warnings []string `json:"warnings"`
}

// ConfigApplied answers PUT /admin/config: the keys it changed, those
// that wait for a restart, and warnings.
type ConfigApplied struct {
	Applied       bool     `json:"applied"`
	Changed       []string `json:"changed"`
	RestartNeeded []string `json:"restart_needed"`
	Warnings      []string `json:"warnings"`
}
