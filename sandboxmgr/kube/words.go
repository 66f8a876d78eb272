package kube

import (
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The shared words (package runtime) under the names this package uses.
type (
	ctrInfo  = runtime.Instance
	ctrSpec  = runtime.Spec
	ctrEvent = runtime.Event
)

var (
	errNameTaken   = runtime.ErrNameTaken
	ErrNoContainer = runtime.ErrNotFound
	ErrUnavailable = runtime.ErrUnavailable
	ErrNoImage     = runtime.ErrNoImage
	ErrForeign     = runtime.ErrForeign
)

var sleep = runtime.Sleep

const (
	stateCreated    = runtime.StateCreated
	stateRunning    = runtime.StateRunning
	stateRestarting = runtime.StateRestarting
	stateRemoving   = runtime.StateRemoving
	stateExited     = runtime.StateExited

	evDie         = runtime.EventDie
	evStart       = runtime.EventStart
	evKill        = runtime.EventKill
	evRename      = runtime.EventRename
	evDestroy     = runtime.EventDestroy
	evKept        = runtime.EventKept
	evWatchBroken = runtime.EventWatchBroken

	LabelManaged  = runtime.LabelManaged
	LabelSandbox  = runtime.LabelSandbox
	LabelTemplate = runtime.LabelTemplate
	LabelPool     = runtime.LabelPool
)

// ContainerName is sandbox id's pod name.
func ContainerName(id string) string { return runtime.ContainerName(id) }

// validID reports a valid sandbox id.
func validID(id string) bool {
	_, ok := runtime.SandboxOf(runtime.ContainerName(id))
	return ok
}
