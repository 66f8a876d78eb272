// Package runtime is the seam between the sandbox manager and a runtime:
// the Runtime interface in the manager's words, and the Instances, Specs,
// Events, labels, errors and Capabilities it speaks in. A runtime
// (sandboxmgr/docker, sandboxmgr/kube) imports this package and neither the
// manager nor another runtime. Instance IDs are opaque here.
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

// Runtime is what the manager asks of a runtime; what it can do beyond
// that is declared in Capabilities, never found by type assertion. Every
// method honors ctx; connection failures wrap ErrUnavailable. Calls that
// act on an instance take the ID of one the manager created or found
// owned (sandboxmgr's scope.go).
type Runtime interface {
	Ping(ctx context.Context) error
	// Lookup returns the instance named name (or with that ID);
	// ErrNotFound if missing. A sandbox with only its workspace left
	// comes back Kept, in List too.
	// It reads the runtime itself, never a cache or an informer: the
	// manager confirms new upstream connections with it (Docker: an
	// inspect; Kubernetes: a GET of the pod, its UID checked).
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
	// Isolate makes the sandboxes' network exist: only the gateway in.
	Isolate(ctx context.Context, network string, labels map[string]string) error
	// Watch calls fn, in order, for each change of instances carrying
	// labels from since (zero: now), until the stream breaks or ctx ends.
	Watch(ctx context.Context, since time.Time, labels map[string]string, fn func(Event)) error
	Capabilities() Capabilities
	Close() error
}

// Errors a runtime returns, wrapped; the manager passes them on.
var (
	// ErrUnavailable: the runtime cannot be reached.
	ErrUnavailable = errors.New("sandbox runtime unavailable")
	// ErrNotFound: no such instance.
	ErrNotFound = errors.New("no such sandbox")
	// ErrNoImage: the image is not present (Capabilities.Images).
	ErrNoImage = errors.New("image not found locally")
	// ErrNameTaken: another caller (maybe another replica) owns the name.
	ErrNameTaken = errors.New("container name already in use")
	// ErrNoNetwork: the network vanished; the manager makes it again.
	ErrNoNetwork = errors.New("network not found")
	// ErrForeign: the name is another scope's (or nobody's); left alone.
	ErrForeign = errors.New("container exists but is not managed by this gateway")
)

// Labels on every managed instance.
const (
	LabelManaged  = "previewgate.managed"
	LabelSandbox  = "previewgate.sandbox"
	LabelTemplate = "previewgate.template"
	// LabelPort records the app port at creation (a template may change).
	LabelPort = "previewgate.port"
	// LabelPool marks a pool instance with its template; it stays after a claim.
	LabelPool = "previewgate.pool"
	// LabelPoolSpec stamps a pool instance with a digest of what it was
	// made from, so a claim never hands out one of an older template.
	LabelPoolSpec = "previewgate.pool.spec"
	// LabelInstance names a gateway's scope.
	LabelInstance = "previewgate.instance"
	// LabelScope stamps an instance with its maker's scope (Stamp).
	LabelScope = "previewgate.scope"
	// LabelSubject is the digest of the token subject it was made for,
	// so every replica can count a subject's running sandboxes (#24, 9).
	LabelSubject = "previewgate.subject"
	// LabelMetaPrefix prefixes a sandbox's own metadata (#23).
	LabelMetaPrefix = "previewgate.meta."
)

// Stamp is the LabelScope value of a gateway with labels l: a digest, a
// valid label value, equal exactly for equal scopes.
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

// HasLabels reports whether got carries every label of want.
func HasLabels(got, want map[string]string) bool {
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

// Shared returns the labels of what every gateway on a runtime uses alike
// (the network or NetworkPolicy, built images): l and LabelManaged without
// LabelInstance, so removing one scope's sandboxes leaves them.
func Shared(l map[string]string) map[string]string {
	out := maps.Clone(l)
	if out == nil {
		out = make(map[string]string, 1)
	}
	out[LabelManaged] = "true"
	delete(out, LabelInstance)
	return out
}

// Name is the name of sandbox id's instance in the scope stamped stamp:
// "pg-<stamp>-<id>", unique in a runtime and so the lock between racing
// creators. A stamp has one length, so no two (stamp, id) pairs, no
// LegacyName and no pool instance share a name. At most 75 bytes: a
// Docker name, a pod, claim and Lease name; no label value holds it.
func Name(stamp, id string) string { return namePrefix + stamp + "-" + id }

// LegacyName is the name earlier versions gave sandbox id's instance in
// every scope; the manager still adopts such an instance.
func LegacyName(id string) string { return legacyPrefix + id }

const (
	namePrefix   = "pg-"
	legacyPrefix = "previewgate-"
	stampLen     = 16 // len(Stamp(...))
)

// SandboxOf returns the sandbox id an instance name stands for (Name or
// LegacyName), unchecked.
func SandboxOf(name string) (string, bool) {
	name = strings.TrimPrefix(name, "/")
	if rest, ok := strings.CutPrefix(name, namePrefix); ok && len(rest) > stampLen+1 && rest[0] == 's' && rest[stampLen] == '-' {
		return rest[stampLen+1:], true
	}
	return strings.CutPrefix(name, legacyPrefix)
}

// Instance states, in Docker's words.
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
	// Kept: only the sandbox's kept workspace is left (Kubernetes: a claim
	// without its pod); State is StateExited.
	Kept bool
	// StoppedAt is when the runtime recorded the stop of a Kept sandbox or
	// of one being stopped (StateRemoving); zero if it did not.
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
	// Port and ReadyPath are the app's (Kubernetes declares them).
	Port      int
	ReadyPath string
	// Workspace is a volume kept across stops (Capabilities.Workspaces).
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
	// EventKept: the pod is gone, its workspace kept: stopped.
	EventKept = "kept"
	// EventWatchBroken: events may be missing until the next re-check.
	EventWatchBroken = "watch-broken"
)

// Event is one change of an instance.
type Event struct {
	Action  string
	ID      string
	Name    string // the instance's name now (after a rename: the new name)
	OldName string // rename only: the previous name
	Pool    string // the instance's LabelPool
	// Labels are the instance's, where the runtime reports them.
	Labels map[string]string
	Time   time.Time
}

// SleepMode says how Sleep puts an instance to rest.
type SleepMode int

const (
	// SleepStop stops it gracefully; its files (or workspace) stay.
	SleepStop SleepMode = iota
	// SleepPause freezes it where the runtime can (Capabilities.Pause);
	// else it stops.
	SleepPause
	// SleepKill stops it at once (a failed start needs no graceful stop).
	SleepKill
)

// Capabilities is what a runtime can do beyond the manager's interface.
// A nil field is a capability the runtime does not have.
type Capabilities struct {
	// Images builds and checks images on the runtime; nil: it pulls them.
	Images Images
	// Logs reads an instance's output.
	Logs Logs
	// Activity is a signal of traffic every replica can see.
	Activity Activity
	// Pause: SleepPause keeps the instance's memory.
	Pause bool
	// Workspaces: Spec.Workspace is honored.
	Workspaces bool
	// Locks are shared by one deployment's replicas; nil: none.
	Locks Locks
	// SharedPool: a claim of a pool instance another replica claimed fails
	// (ErrNotFound), so every replica may claim from the whole pool.
	SharedPool bool
}

// Locks are leases the replicas of one deployment share.
type Locks interface {
	// Hold takes or renews lock key for holder for ttl; true if holder
	// has it now.
	Hold(ctx context.Context, key, holder string, ttl time.Duration) (bool, error)
}

// Images builds and checks images where the runtime runs them.
type Images interface {
	// Build builds tag from a tar build context, labelled with labels.
	Build(ctx context.Context, tag string, buildContext []byte, labels map[string]string) error
	// Has reports whether tag exists.
	Has(ctx context.Context, tag string) (bool, error)
}

// Logs reads an instance's output.
type Logs interface {
	// Logs writes the instance's output to w: the last tail lines, then
	// (follow) new output until it stops or ctx ends. ErrNotFound if missing.
	Logs(ctx context.Context, id string, tail int, follow bool, w io.Writer) error
}

// Activity is traffic any replica caused, as the runtime knows it.
type Activity interface {
	// LastActivity returns the latest activity any replica caused.
	LastActivity(ctx context.Context, id string, inst Instance) (time.Time, error)
	// RecordEvery is how often a replica publishes its view; 0: never.
	RecordEvery() time.Duration
	// RecordActivity publishes this replica's latest activity.
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
