// Package runtime is the seam between the sandbox manager and a runtime:
// the Runtime interface, in the manager's words, and the words it speaks:
// an Instance (one container or pod of a sandbox, as the runtime reports
// it), a Spec to create one, the Events a runtime watches, the labels
// every instance carries, the errors a runtime returns, and the
// Capabilities a runtime declares beyond Runtime. A runtime
// (sandboxmgr/docker, sandboxmgr/kube) imports this package and neither
// the manager nor another runtime; the serve wiring makes one and hands
// it to sandboxmgr.New. Instance IDs are opaque here: each runtime packs
// what it needs into them (a Docker container ID, "<pod>/<uid>").
package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Runtime is what the manager asks of a runtime: look an instance up,
// list them, create, start, resume, put to sleep, claim from the pool,
// remove, isolate the sandboxes' network, watch. What a runtime can do
// beyond it is declared in Capabilities, never found by type assertion.
// Every method honors ctx; connection failures wrap ErrUnavailable. Calls
// that act on an instance take the ID of one the manager created or
// looked up and found owned (sandboxmgr's scope.go).
type Runtime interface {
	Ping(ctx context.Context) error
	// Lookup returns the instance named name (or with that ID);
	// ErrNotFound if missing. A sandbox of which only its kept workspace
	// is left comes back Kept, as does List's entry for it.
	Lookup(ctx context.Context, name string) (Instance, error)
	// List returns every instance (any state) carrying all of labels.
	List(ctx context.Context, labels map[string]string) ([]Instance, error)
	// Create creates (does not start) an instance and returns its ID;
	// ErrNameTaken if the name is in use, ErrNoImage if the image is
	// missing (runtimes with Capabilities.Images), ErrNoNetwork if the
	// network Isolate made is gone.
	Create(ctx context.Context, spec Spec) (id string, err error)
	Start(ctx context.Context, id string) error  // ErrNotFound if missing
	Resume(ctx context.Context, id string) error // undoes a SleepPause; ErrNotFound if missing
	Sleep(ctx context.Context, id string, mode SleepMode) error
	// Claim binds pool instance id to name (a sandbox's); ErrNameTaken if
	// name is in use, ErrNotFound if the instance is gone.
	Claim(ctx context.Context, id, name string) error
	Remove(ctx context.Context, id string) error // force; ErrNotFound if missing
	// Isolate makes the sandboxes' network (name) exist: no traffic
	// between sandboxes, only the gateway in.
	Isolate(ctx context.Context, network string, labels map[string]string) error
	// Watch follows changes of instances carrying labels, calling fn for
	// each in order, from since (zero: from now). It blocks until the
	// stream breaks (the error says why) or ctx ends.
	Watch(ctx context.Context, since time.Time, labels map[string]string, fn func(Event)) error
	Capabilities() Capabilities
	Close() error
}

// Errors a runtime returns, wrapped with context; the manager passes
// them on as they are.
var (
	// ErrUnavailable: the runtime (Docker Engine, API server) cannot be
	// reached. Connection failures wrap it.
	ErrUnavailable = errors.New("sandbox runtime unavailable")
	// ErrNotFound: no such instance.
	ErrNotFound = errors.New("no such sandbox")
	// ErrNoImage: the image is not present (a runtime that builds or
	// checks images locally).
	ErrNoImage = errors.New("image not found locally")
	// ErrNameTaken: another caller (maybe another gateway replica) owns
	// the name and is creating the instance.
	ErrNameTaken = errors.New("container name already in use")
	// ErrNoNetwork: the sandboxes' network vanished; the manager makes it
	// again (Isolate) and retries.
	ErrNoNetwork = errors.New("network not found")
	// ErrForeign: the name is taken by something of another gateway's
	// scope (or nobody's); it is left alone.
	ErrForeign = errors.New("container exists but is not managed by this gateway")
)

// Labels on every managed instance.
const (
	LabelManaged  = "previewgate.managed"
	LabelSandbox  = "previewgate.sandbox"
	LabelTemplate = "previewgate.template"
	// LabelPort records the app port at creation, so an instance keeps
	// being reached on its own port when its template changes later.
	LabelPort = "previewgate.port"
	// LabelPool marks a warm pool instance with its template's name. It
	// stays after the instance is claimed.
	LabelPool = "previewgate.pool"
	// LabelPoolSpec stamps a warm pool instance with a digest of what
	// it was made from (image, cmd, env, limits, capabilities), so a
	// claim never hands out one made from a template since reloaded.
	LabelPoolSpec = "previewgate.pool.spec"
	// LabelInstance names a gateway's scope (config scope, or the
	// development default's per-data-dir id).
	LabelInstance = "previewgate.instance"
	// LabelScope stamps an instance with the scope of the gateway that
	// made it (sandboxmgr/scope.go).
	LabelScope = "previewgate.scope"
	// LabelSubject records, as a digest (a valid label value whatever the
	// subject), the token subject an instance was created for, so every
	// replica can count a subject's running sandboxes (#24, 9).
	LabelSubject = "previewgate.subject"
	// LabelMetaPrefix prefixes a sandbox's own metadata (#23): key k is
	// the label LabelMetaPrefix+k, set at create and never changed.
	LabelMetaPrefix = "previewgate.meta."
)

// Stamp is the LabelScope value of a gateway with labels l: a digest of
// them, so it is a valid label value on every runtime whatever they hold,
// and equal exactly for equal scopes.
func Stamp(l map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(l)) {
		if k == LabelManaged || k == LabelScope {
			continue
		}
		fmt.Fprintf(h, "%q=%q\n", k, l[k])
	}
	return "s" + hex.EncodeToString(h.Sum(nil))[:15]
}

// Scoped returns the labels of everything a gateway with labels l makes
// (instances, records): l, LabelManaged and l's Stamp.
func Scoped(l map[string]string) map[string]string {
	out := maps.Clone(l)
	if out == nil {
		out = make(map[string]string, 2)
	}
	out[LabelManaged] = "true"
	out[LabelScope] = Stamp(l)
	return out
}

// Shared returns the labels of what every gateway on a runtime uses alike
// (the sandboxes' network or NetworkPolicy, built images), for a gateway
// with labels l: l and LabelManaged without LabelInstance, so that
// removing one gateway's sandboxes by its instance label leaves what
// another scope's gateway uses.
func Shared(l map[string]string) map[string]string {
	out := maps.Clone(l)
	if out == nil {
		out = make(map[string]string, 1)
	}
	out[LabelManaged] = "true"
	delete(out, LabelInstance)
	return out
}

// Name is the name of sandbox id's instance in the scope stamped stamp
// (Stamp): "pg-<stamp>-<id>". The name is unique in a runtime, which makes
// it the lock between racing creators of one scope; a stamp has one
// length, so no two (stamp, id) pairs give one name, and none gives an
// earlier version's name (LegacyName, which no scope's new instances
// take) or a pool instance's: two gateway scopes' sandboxes of one id are
// two instances. At most 75 bytes for the longest id (55): a Docker name,
// a Kubernetes pod, claim and Lease name (a pod's hostname is the first
// 63); no label value holds it.
func Name(stamp, id string) string { return namePrefix + stamp + "-" + id }

// LegacyName is the name versions before scoped names gave sandbox id's
// instance, in every scope: "previewgate-<id>". Such an instance is still
// its sandbox's: the manager finds it there and adopts it as it is.
func LegacyName(id string) string { return legacyPrefix + id }

const (
	namePrefix   = "pg-"
	legacyPrefix = "previewgate-"
	stampLen     = 16 // len(Stamp(...))
)

// SandboxOf returns the sandbox id an instance name stands for, in either
// form (Name, LegacyName); unchecked: the caller checks it is an id, and
// the instance's labels say whose it is.
func SandboxOf(name string) (string, bool) {
	name = strings.TrimPrefix(name, "/")
	if rest, ok := strings.CutPrefix(name, namePrefix); ok && len(rest) > stampLen+1 && rest[0] == 's' && rest[stampLen] == '-' {
		return rest[stampLen+1:], true
	}
	return strings.CutPrefix(name, legacyPrefix)
}

// Instance states, in Docker's words (a Kubernetes runtime maps pod
// phases onto them).
const (
	StateCreated    = "created"
	StateRunning    = "running"
	StatePaused     = "paused"
	StateRestarting = "restarting"
	StateRemoving   = "removing"
	StateExited     = "exited"
	StateDead       = "dead"
)

// Instance is what the manager knows of one container or pod.
type Instance struct {
	ID        string // opaque to the manager; the runtime's handle
	Name      string // previewgate-<id> (a claimed pool instance: its sandbox's), without a slash
	Labels    map[string]string
	Image     string
	State     string
	ExitCode  int
	OOMKilled bool   // the last run was killed for using more memory than its limit
	IP        string // where the gateway dials it
	StartedAt time.Time
	Created   time.Time
	// Kept: no container, only the sandbox's kept workspace (Kubernetes: a
	// PersistentVolumeClaim without its pod). State is StateExited; Start
	// creates an instance on it, Remove deletes it.
	Kept bool
	// StoppedAt is when the runtime recorded the stop of a Kept sandbox,
	// or of one whose stop is under way (State StateRemoving: Kubernetes,
	// a pod being deleted, listed with its workspace claim); zero if it
	// did not.
	StoppedAt time.Time
}

// Spec is an instance to create, already resolved from a template.
type Spec struct {
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
	// Workspace, if set, is a volume kept across stops (a runtime whose
	// Capabilities.Workspaces is true).
	Workspace *Workspace
}

// Workspace is a volume kept across a sandbox's stops.
type Workspace struct {
	Size         int64  // bytes
	Path         string // absolute mount path in the container
	StorageClass string // "": the cluster's default
}

// Event actions a runtime reports.
const (
	EventDie     = "die"
	EventOOM     = "oom"
	EventStop    = "stop"
	EventKill    = "kill"
	EventDestroy = "destroy"
	EventPause   = "pause"
	EventUnpause = "unpause"
	EventStart   = "start"
	EventRename  = "rename" // a pool claim: the instance now has its sandbox's name
	// EventKept: the pod is gone, its workspace kept: the sandbox is
	// stopped, as after a Docker stop.
	EventKept = "kept"
	// EventWatchBroken: the watch failed; events may be missing until the
	// manager re-checked (the Kubernetes informer relists by itself).
	EventWatchBroken = "watch-broken"
)

// Event is one change of an instance.
type Event struct {
	Action  string
	ID      string
	Name    string // the instance's name now (after a rename: the new name)
	OldName string // rename only: the previous name
	Pool    string // the instance's LabelPool
	// Labels are the instance's labels where the runtime reports them;
	// the manager ignores events of instances it does not own.
	Labels map[string]string
	Time   time.Time
}

// SleepMode says how Sleep puts an instance to rest.
type SleepMode int

const (
	// SleepStop stops it gracefully; its files stay (Docker) or its
	// workspace does (Kubernetes).
	SleepStop SleepMode = iota
	// SleepPause freezes it, memory kept, where the runtime can
	// (Capabilities.Pause); else it stops.
	SleepPause
	// SleepKill stops it at once (a failed start needs no graceful stop).
	SleepKill
)

// Capabilities is what a runtime can do beyond the manager's interface.
// A nil field is a capability the runtime does not have.
type Capabilities struct {
	// Images builds and checks images on the runtime itself; nil: the
	// runtime pulls them (Kubernetes), and a missing image shows when a
	// pod cannot start.
	Images Images
	// Logs reads an instance's output.
	Logs Logs
	// Activity is a signal of traffic every replica can see.
	Activity Activity
	// Pause: SleepPause keeps the instance's memory.
	Pause bool
	// Workspaces: Spec.Workspace is honored.
	Workspaces bool
	// Locks are shared by the replicas of one deployment; nil: the
	// runtime has none (each replica acts alone).
	Locks Locks
	// SharedPool: Claim of a pool instance that another replica claimed
	// fails (ErrNotFound) instead of taking it over, so every replica may
	// claim from the whole pool. (Docker's claim is a rename, which would
	// take a claimed container over; its one gateway per scope claims
	// alone.)
	SharedPool bool
}

// Locks are leases the replicas of one deployment share.
type Locks interface {
	// Hold takes lock key for holder, or renews it if holder has it, for
	// ttl; true if holder has it now. A lock not renewed for ttl may be
	// taken by another holder.
	Hold(ctx context.Context, key, holder string, ttl time.Duration) (bool, error)
}

// Images builds and checks images where the runtime runs them.
type Images interface {
	// Build builds tag from a tar build context (a Dockerfile at its
	// root), labelled with labels; the build's own error if a step failed.
	Build(ctx context.Context, tag string, buildContext []byte, labels map[string]string) error
	// Has reports whether tag exists.
	Has(ctx context.Context, tag string) (bool, error)
}

// Logs reads an instance's output.
type Logs interface {
	// Logs writes the instance's stdout and stderr to w: the last tail
	// lines, then (follow) new output until it stops or ctx ends.
	// ErrNotFound if missing.
	Logs(ctx context.Context, id string, tail int, follow bool, w io.Writer) error
}

// Activity is traffic any replica caused, as the runtime knows it.
type Activity interface {
	// LastActivity returns the latest activity of sandbox id (instance
	// inst) that any replica caused; zero if unknown.
	LastActivity(ctx context.Context, id string, inst Instance) (time.Time, error)
	// RecordEvery is how often a replica publishes its own view with
	// RecordActivity; 0: never.
	RecordEvery() time.Duration
	// RecordActivity publishes this replica's latest activity of the
	// sandbox whose instance is named name.
	RecordActivity(ctx context.Context, name string, at time.Time) error
}

// Sleep waits d or until ctx ends (its error then).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
