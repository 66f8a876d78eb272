package sandboxmgr

import (
	"context"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// engine is what the manager asks of a runtime, in its own words (#21):
// look an instance up, list them, create, start, resume, put to sleep,
// claim from the pool, remove, isolate the sandboxes' network, watch. One
// package per runtime implements it (sandboxmgr/docker, sandboxmgr/kube);
// what a runtime can do beyond it is declared in Capabilities, never found
// by type assertion. Every method honors ctx; connection failures wrap
// ErrUnavailable. Calls that act on an instance take the ID of one the
// manager created or looked up and found owned (scope.go).
type engine interface {
	Ping(ctx context.Context) error
	// Lookup returns the instance named name (or with that ID);
	// ErrNoContainer if missing. A sandbox of which only its kept
	// workspace is left comes back Kept, as does List's entry for it.
	Lookup(ctx context.Context, name string) (ctrInfo, error)
	// List returns every instance (any state) carrying all of labels.
	List(ctx context.Context, labels map[string]string) ([]ctrInfo, error)
	// Create creates (does not start) an instance and returns its ID;
	// errNameTaken if the name is in use, ErrNoImage if the image is
	// missing (runtimes with Capabilities.Images).
	Create(ctx context.Context, spec ctrSpec) (id string, err error)
	Start(ctx context.Context, id string) error  // ErrNoContainer if missing
	Resume(ctx context.Context, id string) error // undoes a SleepPause; ErrNoContainer if missing
	Sleep(ctx context.Context, id string, mode runtime.SleepMode) error
	// Claim binds pool instance id to name (a sandbox's); errNameTaken if
	// name is in use, ErrNoContainer if the instance is gone.
	Claim(ctx context.Context, id, name string) error
	Remove(ctx context.Context, id string) error // force; ErrNoContainer if missing
	// Isolate makes the sandboxes' network (name) exist: no traffic
	// between sandboxes, only the gateway in.
	Isolate(ctx context.Context, network string, labels map[string]string) error
	// Watch follows instance changes of instances carrying labels,
	// calling fn for each in order, from since (zero: from now). It blocks
	// until the stream breaks (the error says why) or ctx ends.
	Watch(ctx context.Context, since time.Time, labels map[string]string, fn func(ctrEvent)) error
	Capabilities() runtime.Capabilities
	Close() error
}

// The manager's names for the shared words (package runtime).
type (
	ctrInfo  = runtime.Instance
	ctrSpec  = runtime.Spec
	ctrEvent = runtime.Event
)

// errNameTaken reports a create or claim that lost to another caller.
var errNameTaken = runtime.ErrNameTaken

// Instance states.
const (
	stateCreated    = runtime.StateCreated
	stateRunning    = runtime.StateRunning
	statePaused     = runtime.StatePaused
	stateRestarting = runtime.StateRestarting
	stateRemoving   = runtime.StateRemoving
	stateExited     = runtime.StateExited
	stateDead       = runtime.StateDead
)
