package sandboxmgr

import (
	"context"
	"errors"
	"time"

	"github.com/previewgate/previewgate/config"
)

// engine is the part of the Docker Engine API the manager uses. Every method
// honors ctx. Connection failures come back wrapping ErrUnavailable.
type engine interface {
	Ping(ctx context.Context) error
	// Inspect returns the container named name; ErrNoContainer if missing.
	// A sandbox of which only its kept workspace is left comes back Kept
	// (Kubernetes), as does List's entry for it.
	Inspect(ctx context.Context, name string) (ctrInfo, error)
	// Create creates (does not start) a container and returns its ID.
	// errNameTaken if the name is in use, ErrNoImage if the image is not
	// present locally.
	Create(ctx context.Context, spec ctrSpec) (id string, err error)
	// The calls below take a container name or ID. The manager passes the
	// ID of a container it created or inspected and found owned (scope.go).
	Start(ctx context.Context, name string) error   // ErrNoContainer if missing
	Unpause(ctx context.Context, name string) error // ErrNoContainer if missing
	Pause(ctx context.Context, name string) error   // ErrNoContainer if missing
	// Rename renames container (name or id) to name; errNameTaken if name
	// is in use, ErrNoContainer if container is missing.
	Rename(ctx context.Context, container, name string) error
	Stop(ctx context.Context, name string) error   // ErrNoContainer if missing
	Remove(ctx context.Context, name string) error // force; ErrNoContainer if missing
	// List returns all containers (any state) carrying every label in labels.
	List(ctx context.Context, labels map[string]string) ([]ctrInfo, error)
	// EnsureNetwork creates the bridge network name (no inter-container
	// traffic) unless it exists.
	EnsureNetwork(ctx context.Context, name string, labels map[string]string) error
	BuildImage(ctx context.Context, tag string, buildContext []byte, labels map[string]string) error
	HasImage(ctx context.Context, tag string) (bool, error)
	// Events follows container events (watchedActions) of containers
	// carrying every label in labels, calling fn for each in order, from
	// since (zero: from now). It blocks until the stream breaks (the error
	// says why; connection failures wrap ErrUnavailable) or ctx ends.
	Events(ctx context.Context, since time.Time, labels map[string]string, fn func(ctrEvent)) error
}

// errNameTaken reports a 409 on create: another caller (maybe another
// gateway replica) owns the name and is creating the container.
var errNameTaken = errors.New("container name already in use")

// Container states as Docker reports them.
const (
	stateCreated    = "created"
	stateRunning    = "running"
	statePaused     = "paused"
	stateRestarting = "restarting"
	stateRemoving   = "removing"
	stateExited     = "exited"
	stateDead       = "dead"
)

// ctrInfo is what the manager needs to know about a container.
type ctrInfo struct {
	ID        string
	Name      string // without the leading slash
	Labels    map[string]string
	Image     string // as the container was created from (tag or id)
	State     string
	ExitCode  int
	IP        string // on the managed network if attached, else any
	StartedAt time.Time
	Created   time.Time
	// Kept: no container, only the sandbox's kept workspace (Kubernetes: a
	// PersistentVolumeClaim without its pod). State is stateExited; a wake
	// creates a container on it, Remove deletes it (kube_workspace.go).
	Kept bool
	// StoppedAt is when the runtime recorded the stop of a Kept sandbox;
	// zero if it did not.
	StoppedAt time.Time
}

// ctrSpec is a container to create, already resolved from a template.
type ctrSpec struct {
	Name     string
	Image    string
	Cmd      []string
	Env      []string // KEY=value, sorted
	Labels   map[string]string
	Network  string
	Memory   int64   // bytes; 0 = unlimited
	CPUs     float64 // 0 = unlimited
	Pids     int64   // 0 = unlimited
	CapAdd   []string
	ReadOnly bool // read-only root with a tmpfs at /tmp
	// Port and ReadyPath are the app's (the Kubernetes runtime declares
	// them in the pod; Docker needs neither).
	Port      int
	ReadyPath string
	// Workspace, if set, is a volume kept across stops (the Kubernetes
	// runtime only; config refuses it with Docker, which keeps a stopped
	// container's files anyway).
	Workspace *config.Workspace
}
