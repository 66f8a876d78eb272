package sandboxmgr

import (
	"context"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// fakeEngine keeps containers in memory. Every container's app is the
// test's listener on 127.0.0.1; states change only through the methods.
type fakeEngine struct {
	runtime.Runtime // methods a test does not need panic when called

	mu      sync.Mutex // guards ctrs
	ctrs    map[string]*runtime.Instance
	creates atomic.Int64
	starts  atomic.Int64
	inspect atomic.Int64

	// createHook, if set, runs before Create takes effect; returning an
	// error fails the create.
	createHook func(ctx context.Context, s runtime.Spec) error
	// events, if set, serves Events; unset, Events blocks until ctx ends.
	events func(ctx context.Context, since time.Time, fn func(runtime.Event)) error
	lists  atomic.Int64
	clock  atomic.Int64 // start times: every start is a new, later one
}

func newFake() *fakeEngine { return &fakeEngine{ctrs: make(map[string]*runtime.Instance)} }

// put adds a managed container (labels plus previewgate.managed=true).
func (f *fakeEngine) put(name, state string, labels map[string]string) {
	labels = maps.Clone(labels)
	if labels == nil {
		labels = make(map[string]string)
	}
	labels[runtime.LabelManaged] = "true"
	f.putForeign(name, state, labels)
}

// putForeign adds a container with exactly labels.
func (f *fakeEngine) putForeign(name, state string, labels map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &runtime.Instance{ID: "id-" + name, Name: name, State: state, Labels: labels, IP: "127.0.0.1"}
	if state == runtime.StateRunning || state == runtime.StatePaused {
		c.StartedAt = f.startTime()
	}
	f.ctrs[name] = c
}

// putKept adds a managed sandbox of which only the workspace is kept (the
// Kubernetes runtime's claim without a pod), stopped at stopped (zero:
// not recorded).
func (f *fakeEngine) putKept(name string, stopped time.Time, labels map[string]string) {
	f.put(name, runtime.StateExited, labels)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctrs[name].Kept, f.ctrs[name].StoppedAt = true, stopped
}

// startTime is the start time of the next start: now, but always later
// than the one before (two starts are two runs).
func (f *fakeEngine) startTime() time.Time {
	for {
		last, now := f.clock.Load(), time.Now().UnixNano()
		if now <= last {
			now = last + 1
		}
		if f.clock.CompareAndSwap(last, now) {
			return time.Unix(0, now)
		}
	}
}

// restart stops and starts name again (docker restart): same ID, same
// address, a new run.
func (f *fakeEngine) restart(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.ctrs[name]
	c.State = runtime.StateRunning
	c.StartedAt = f.startTime()
}

func (f *fakeEngine) state(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.ctrs[name]; c != nil {
		return c.State
	}
	return ""
}

// findLocked resolves ref as Docker does: a name, else a container ID.
// f.mu must be held.
func (f *fakeEngine) findLocked(ref string) *runtime.Instance {
	if c := f.ctrs[ref]; c != nil {
		return c
	}
	for _, c := range f.ctrs {
		if c.ID == ref {
			return c
		}
	}
	return nil
}

func (f *fakeEngine) Ping(context.Context) error { return nil }

func (f *fakeEngine) Lookup(ctx context.Context, name string) (runtime.Instance, error) {
	f.inspect.Add(1)
	if err := ctx.Err(); err != nil {
		return runtime.Instance{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.findLocked(name)
	if c == nil {
		return runtime.Instance{}, runtime.ErrNotFound
	}
	return *c, nil
}

func (f *fakeEngine) Create(ctx context.Context, s runtime.Spec) (string, error) {
	if f.createHook != nil {
		if err := f.createHook(ctx, s); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.ctrs[s.Name]; c != nil && !c.Kept { // a kept workspace gets a container again
		return "", runtime.ErrNameTaken
	}
	f.creates.Add(1)
	f.ctrs[s.Name] = &runtime.Instance{ID: "id-" + s.Name, Name: s.Name, State: runtime.StateCreated, Labels: s.Labels, IP: "127.0.0.1", Image: s.Image}
	return "id-" + s.Name, nil
}

func (f *fakeEngine) setState(name, from, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.findLocked(name)
	if c == nil {
		return runtime.ErrNotFound
	}
	if from == "" || c.State == from || (from == "startable" && (c.State == runtime.StateCreated || c.State == runtime.StateExited)) {
		c.State = to
	}
	return nil
}

func (f *fakeEngine) Start(_ context.Context, name string) error {
	f.starts.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.findLocked(name)
	if c == nil {
		return runtime.ErrNotFound
	}
	if c.State == runtime.StateCreated || c.State == runtime.StateExited {
		c.State = runtime.StateRunning
		c.StartedAt = f.startTime()
	}
	return nil
}

func (f *fakeEngine) Resume(_ context.Context, name string) error {
	return f.setState(name, runtime.StatePaused, runtime.StateRunning)
}

func (f *fakeEngine) Claim(_ context.Context, container, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.findLocked(container)
	if c == nil {
		return runtime.ErrNotFound
	}
	if f.ctrs[name] != nil {
		return runtime.ErrNameTaken
	}
	delete(f.ctrs, c.Name)
	c.Name = name
	f.ctrs[name] = c
	return nil
}

func (f *fakeEngine) Sleep(_ context.Context, name string, mode runtime.SleepMode) error {
	if mode == runtime.SleepPause {
		return f.setState(name, runtime.StateRunning, runtime.StatePaused)
	}
	return f.setState(name, "", runtime.StateExited)
}

// Capabilities: a pause that keeps memory, nothing else.
func (f *fakeEngine) Capabilities() runtime.Capabilities { return runtime.Capabilities{Pause: true} }

func (f *fakeEngine) Close() error { return nil }

func (f *fakeEngine) Remove(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.findLocked(name)
	if c == nil {
		return runtime.ErrNotFound
	}
	delete(f.ctrs, c.Name)
	return nil
}

func (f *fakeEngine) Watch(ctx context.Context, since time.Time, _ map[string]string, fn func(runtime.Event)) error {
	if f.events != nil {
		return f.events(ctx, since, fn)
	}
	<-ctx.Done()
	return ctx.Err()
}

func (f *fakeEngine) List(_ context.Context, labels map[string]string) ([]runtime.Instance, error) {
	f.lists.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runtime.Instance
next:
	for _, c := range f.ctrs {
		for k, v := range labels {
			if c.Labels[k] != v {
				continue next
			}
		}
		out = append(out, *c)
	}
	return out, nil
}

func (f *fakeEngine) Isolate(context.Context, string, map[string]string) error { return nil }

// appListener serves TCP on 127.0.0.1 (accepting and closing) for the
// length of the test and returns a template pointing at it.
func appListener(t *testing.T) *config.Template {
	t.Helper()
	addr := testkit.ServeTCP(t, func(net.Conn) {})
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return &config.Template{Name: "fake", Image: "fake:latest", Port: p, Ready: config.Ready{Timeout: config.Duration(5e9)}}
}

// testRecords are records kept in store for a manager of cfg.
func testRecords(store records.Store, cfg Config) *records.Records {
	every := cfg.RecheckEvery
	if every == 0 {
		every = DefaultRecheckEvery
	}
	return records.New(store, records.Options{Labels: runtime.Scoped(cfg.Labels), RecheckEvery: every})
}

func newFakeManager(t *testing.T, cfg Config) (*Manager, *fakeEngine) {
	t.Helper()
	f := newFake()
	m := New(cfg, f, nil, nil)
	t.Cleanup(func() { m.Close() })
	return m, f
}

// cached is id's ready endpoint in m's snapshot.
func cached(m *Manager, id string) (Endpoint, bool) {
	s := m.Sandbox(id).Snapshot()
	return s.Endpoint, s.Ready
}

// known is whether m knows an instance of id, and its template.
func known(m *Manager, id string) (string, bool) {
	s := m.Sandbox(id).Snapshot()
	return s.Template, s.Exists
}

// progressOf is where id's wake stands in m's snapshot.
func progressOf(m *Manager, id string) Progress { return m.Sandbox(id).Snapshot().Progress }

// ContainerName is the name a manager without labels (the fakes' usual
// scope) gives sandbox id's instance.
func ContainerName(id string) string { return runtime.Name(runtime.Stamp(nil), id) }
