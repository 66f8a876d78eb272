// Package sandboxmgr wakes, creates and stops preview containers through the
// Docker Engine API. Docker is the source of truth: every managed container
// carries labels and the name previewgate-<id>; the manager only caches.
// A wake is shared by all requests for a sandbox (single-flight) and bounded
// by the template's ready timeout; a caller giving up never cancels it.
package sandboxmgr

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/previewgate/previewgate/config"
)

// Errors returned by the manager. The gateway maps them to statuses.
var (
	ErrUnavailable = errors.New("docker engine unavailable")    // 503
	ErrNotReady    = errors.New("sandbox did not become ready") // 504
	ErrCapacity    = errors.New("at capacity")                  // 503
	ErrNoContainer = errors.New("no such sandbox")              // 404 on admin calls
)

// Labels on every managed container.
const (
	LabelManaged  = "previewgate.managed"
	LabelSandbox  = "previewgate.sandbox"
	LabelTemplate = "previewgate.template"
)

// Config configures a Manager. Zero values work.
type Config struct {
	Host    string // Docker host. Zero means DOCKER_HOST or the default socket.
	Network string // bridge network for sandboxes. Zero means "previewgate".
	// Labels are added to every container, network and image the manager
	// creates (tests use them to clean up).
	Labels map[string]string
	// MaxConcurrentStarts caps creates/starts in flight. Zero means 4.
	MaxConcurrentStarts int
	// MaxRunning caps running sandboxes. Zero means 50.
	MaxRunning int
	// Templates resolves a template by name for background work (reaper, pool).
	// Nil means none.
	Templates func(name string) *config.Template
}

// Endpoint is where a ready sandbox's app listens.
type Endpoint struct {
	ID       string
	Addr     string // "ip:port", dialable from the gateway
	Template string
}

// Info describes a managed sandbox for the admin API.
type Info struct {
	ID           string    `json:"id"`
	Template     string    `json:"template"`
	State        string    `json:"state"` // running | paused | exited | created | ...
	Container    string    `json:"container"`
	LastActivity time.Time `json:"last_activity,omitzero"`
	StartedAt    time.Time `json:"started_at,omitzero"`
}

// Manager owns the managed containers.
type Manager struct {
	cfg Config
	log *slog.Logger
}

var errTODO = errors.New("sandboxmgr: not implemented yet")

// New connects to Docker (lazily; it does not fail when the engine is down).
func New(cfg Config, log *slog.Logger) (*Manager, error) {
	return &Manager{cfg: cfg, log: log}, nil
}

// Start reconciles with Docker (adopts managed containers, ensures the
// network) and starts background work. It returns ErrUnavailable if Docker
// cannot be reached; the caller may still serve and retry.
func (m *Manager) Start(ctx context.Context) error { return errTODO }

// Close stops background work and waits for it. Containers keep running.
func (m *Manager) Close() error { return nil }

// Ensure returns the endpoint of sandbox id, waking (start/unpause) or
// creating it from tpl as needed, and waits until it is ready.
func (m *Manager) Ensure(ctx context.Context, id string, tpl *config.Template) (Endpoint, error) {
	return Endpoint{}, errTODO
}

// Forget drops the cached endpoint of id (e.g. after a dial to addr failed),
// so the next Ensure checks Docker again.
func (m *Manager) Forget(id, addr string) {}

// Touch records activity on id.
func (m *Manager) Touch(id string) {}

// Hold marks an open long-lived connection (WebSocket, SSE) on id until the
// returned func is called.
func (m *Manager) Hold(id string) (release func()) { return func() {} }

// List returns all managed sandboxes as Docker reports them.
func (m *Manager) List(ctx context.Context) ([]Info, error) { return nil, errTODO }

// Stop stops sandbox id. ErrNoContainer if there is none.
func (m *Manager) Stop(ctx context.Context, id string) error { return errTODO }

// Remove force-removes sandbox id. ErrNoContainer if there is none.
func (m *Manager) Remove(ctx context.Context, id string) error { return errTODO }

// Ping reports whether Docker is reachable.
func (m *Manager) Ping(ctx context.Context) error { return errTODO }

// BuildImage builds image tag from a tar build context (with a Dockerfile at
// its root), labelled with cfg.Labels.
func (m *Manager) BuildImage(ctx context.Context, tag string, buildContext []byte) error {
	return errTODO
}

// HasImage reports whether image tag exists locally.
func (m *Manager) HasImage(ctx context.Context, tag string) (bool, error) { return false, errTODO }
