package sandboxmgr

import (
	"context"
	"errors"
	goruntime "runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestEnsureByState(t *testing.T) {
	for _, tc := range []struct {
		name        string
		state       string // "" = no container
		wantCreates int64
		wantStarts  int64
	}{
		{"missing creates", "", 1, 1},
		{"created starts", runtime.StateCreated, 0, 1},
		{"exited starts", runtime.StateExited, 0, 1},
		{"paused unpauses", runtime.StatePaused, 0, 0},
		{"running is used", runtime.StateRunning, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, f := newFakeManager(t, Config{})
			tpl := appListener(t)
			if tc.state != "" {
				f.put(ContainerName("a"), tc.state, map[string]string{runtime.LabelPort: itoa(tpl.Port), runtime.LabelTemplate: "fake"})
			}
			ep, err := m.Ensure(t.Context(), "a", tpl)
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if want := "127.0.0.1:" + itoa(tpl.Port); ep.Addr != want {
				t.Errorf("got addr %q, want %q", ep.Addr, want)
			}
			if got := f.state(ContainerName("a")); got != runtime.StateRunning {
				t.Errorf("got state %q, want running", got)
			}
			if got := f.creates.Load(); got != tc.wantCreates {
				t.Errorf("got %d creates, want %d", got, tc.wantCreates)
			}
			if got := f.starts.Load(); got != tc.wantStarts {
				t.Errorf("got %d starts, want %d", got, tc.wantStarts)
			}
			// The second call is served from the cache.
			before := f.inspect.Load()
			if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
				t.Fatalf("second Ensure: %v", err)
			}
			if got := f.inspect.Load(); got != before {
				t.Errorf("got %d inspects on the hot path, want 0", got-before)
			}
		})
	}
}

func TestEnsureSharesOneWake(t *testing.T) {
	m, f := newFakeManager(t, Config{})
	tpl := appListener(t)
	gate := make(chan struct{})
	f.createHook = func(ctx context.Context, _ runtime.Spec) error {
		<-gate
		return nil
	}
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := m.Ensure(t.Context(), "cold", tpl)
			errs <- err
		})
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Ensure: %v", err)
		}
	}
	if got := f.creates.Load(); got != 1 {
		t.Errorf("got %d creates, want 1", got)
	}
}

func TestEnsureCallerGivingUpDoesNotCancelWake(t *testing.T) {
	m, f := newFakeManager(t, Config{})
	tpl := appListener(t)
	gate := make(chan struct{})
	f.createHook = func(ctx context.Context, _ runtime.Spec) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := m.Ensure(ctx, "a", tpl)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	close(gate)
	if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
		t.Fatalf("Ensure after the first caller left: %v", err)
	}
	if got := f.creates.Load(); got != 1 {
		t.Errorf("got %d creates, want 1", got)
	}
}

func TestEnsureNameTakenAdoptsOtherContainer(t *testing.T) {
	m, f := newFakeManager(t, Config{})
	tpl := appListener(t)
	// Another replica wins the name between our inspect and our create.
	f.createHook = func(_ context.Context, s runtime.Spec) error {
		f.put(s.Name, runtime.StateCreated, s.Labels)
		return runtime.ErrNameTaken
	}
	ep, err := m.Ensure(t.Context(), "a", tpl)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if ep.ID != "a" {
		t.Errorf("got id %q, want a", ep.ID)
	}
	if got := f.creates.Load(); got != 0 {
		t.Errorf("got %d creates by us, want 0", got)
	}
	if got := f.state(ContainerName("a")); got != runtime.StateRunning {
		t.Errorf("got state %q, want running", got)
	}
}

func TestEnsureErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		id    string
		setup func(m *Manager, f *fakeEngine)
		nilT  bool
		want  error
	}{
		{name: "invalid id", id: "Bad_ID", want: ErrInvalidID},
		{name: "no template, no container", id: "a", nilT: true, want: runtime.ErrNotFound},
		{name: "image missing", id: "a", want: runtime.ErrNoImage, setup: func(_ *Manager, f *fakeEngine) {
			f.createHook = func(context.Context, runtime.Spec) error { return runtime.ErrNoImage }
		}},
		{name: "docker down", id: "a", want: runtime.ErrUnavailable, setup: func(_ *Manager, f *fakeEngine) {
			f.createHook = func(context.Context, runtime.Spec) error { return runtime.ErrUnavailable }
		}},
		{name: "max running", id: "a", want: ErrCapacity, setup: func(m *Manager, f *fakeEngine) {
			f.put(ContainerName("other"), runtime.StateRunning, map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: "other"})
			if err := m.Start(context.Background()); err != nil {
				panic(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, f := newFakeManager(t, Config{MaxRunning: 1})
			tpl := appListener(t)
			if tc.nilT {
				tpl = nil
			}
			if tc.setup != nil {
				tc.setup(m, f)
			}
			_, err := m.Ensure(t.Context(), tc.id, tpl)
			if !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// exitsAtOnce is an engine whose containers exit right after every start.
type exitsAtOnce struct{ *fakeEngine }

func (e exitsAtOnce) Start(context.Context, string) error { e.starts.Add(1); return nil }

func TestEnsureCrashLoopIsNotRetriedForever(t *testing.T) {
	f := newFake()
	m := New(Config{}, exitsAtOnce{f}, nil, nil)
	defer m.Close()
	f.put(ContainerName("a"), runtime.StateExited, nil)
	_, err := m.Ensure(t.Context(), "a", appListener(t))
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("got %v, want ErrNotReady", err)
	}
	if got := f.starts.Load(); got != 2 {
		t.Errorf("got %d starts, want 2", got)
	}
}

func TestEnsureNotReadyAfterTimeout(t *testing.T) {
	m, _ := newFakeManager(t, Config{})
	tpl := appListener(t)
	tpl.Port = 1 // nothing listens there
	tpl.Ready.Timeout = 5e7
	_, err := m.Ensure(t.Context(), "a", tpl)
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("got %v, want ErrNotReady", err)
	}
}

func TestForget(t *testing.T) {
	m, f := newFakeManager(t, Config{})
	tpl := appListener(t)
	ep, err := m.Ensure(t.Context(), "a", tpl)
	if err != nil {
		t.Fatal(err)
	}
	m.Sandbox("a").Forget("10.0.0.1:1") // a stale address: keep the entry
	before := f.inspect.Load()
	if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
		t.Fatal(err)
	}
	if got := f.inspect.Load() - before; got != 0 {
		t.Errorf("got %d inspects after forgetting another addr, want 0", got)
	}
	m.Sandbox("a").Forget(ep.Addr)
	if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
		t.Fatal(err)
	}
	if got := f.inspect.Load() - before; got == 0 {
		t.Error("got no inspect after Forget, want Docker asked again")
	}
}

func TestStartAdoptsAndStopRemove(t *testing.T) {
	m, f := newFakeManager(t, Config{Labels: map[string]string{"scope": "x"}})
	tpl := appListener(t)
	labels := map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: "a", runtime.LabelTemplate: "fake", runtime.LabelPort: itoa(tpl.Port), "scope": "x"}
	f.put(m.name("a"), runtime.StateRunning, labels)
	f.put(m.name("b"), runtime.StateRunning, map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: "b"}) // out of scope
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	list, err := m.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "a" || list[0].State != runtime.StateRunning {
		t.Fatalf("got list %+v, want only a, running", list)
	}
	before := f.inspect.Load()
	if _, err := m.Ensure(t.Context(), "a", nil); err != nil {
		t.Fatal(err)
	}
	if got := f.inspect.Load() - before; got != 0 {
		t.Errorf("got %d inspects for an adopted sandbox, want 0", got)
	}
	if err := m.Stop(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if got := f.state(m.name("a")); got != runtime.StateExited {
		t.Errorf("got state %q after Stop, want exited", got)
	}
	if _, err := m.Ensure(t.Context(), "a", nil); err != nil {
		t.Fatalf("Ensure after Stop: %v", err)
	}
	if err := m.Remove(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	for _, op := range []func(context.Context, string) error{m.Stop, m.Remove} {
		if err := op(t.Context(), "a"); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("got %v, want runtime.ErrNotFound", err)
		}
	}
}

func TestCloseRefusesNewWakes(t *testing.T) {
	m, _ := newFakeManager(t, Config{})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Ensure(t.Context(), "a", appListener(t)); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("got %v, want runtime.ErrUnavailable", err)
	}
}

func TestUnreachableDocker(t *testing.T) {
	rt, err := docker.New(docker.Options{Host: "unix:///nonexistent/docker.sock", DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := New(Config{}, rt, nil, nil)
	defer m.Close()
	for name, op := range map[string]func() error{
		"ping":   func() error { return m.Ping(t.Context()) },
		"start":  func() error { return m.Start(t.Context()) },
		"ensure": func() error { _, err := m.Ensure(t.Context(), "a", appListener(t)); return err },
		"list":   func() error { _, err := m.List(t.Context()); return err },
	} {
		if err := op(); !errors.Is(err, runtime.ErrUnavailable) {
			t.Errorf("%s: got %v, want runtime.ErrUnavailable", name, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestCapacityRecountsFromDocker(t *testing.T) {
	m, f := newFakeManager(t, Config{MaxRunning: 1})
	tpl := appListener(t)
	if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Ensure(t.Context(), "b", tpl); !errors.Is(err, ErrCapacity) {
		t.Fatalf("got %v, want ErrCapacity", err)
	}
	// a stops behind the manager's back (docker stop): room again.
	f.setState(ContainerName("a"), "", runtime.StateExited)
	if _, err := m.Ensure(t.Context(), "b", tpl); err != nil {
		t.Fatalf("got %v after a stopped, want room for b", err)
	}
}

// holdCreates makes the creates of ids wait until release(id) is called;
// each held create announces itself on entered first.
func holdCreates(f *fakeEngine, ids ...string) (entered chan struct{}, release func(id string)) {
	gates := make(map[string]chan struct{}, len(ids))
	for _, id := range ids {
		gates[ContainerName(id)] = make(chan struct{})
	}
	entered = make(chan struct{}, len(ids))
	f.createHook = func(_ context.Context, s runtime.Spec) error {
		if gate := gates[s.Name]; gate != nil {
			entered <- struct{}{}
			<-gate
		}
		return nil
	}
	return entered, func(id string) { close(gates[ContainerName(id)]) }
}

func TestStartSlots(t *testing.T) {
	m, f := newFakeManager(t, Config{MaxConcurrentStarts: 1, StartQueue: 1})
	tpl := appListener(t)
	if _, err := m.Ensure(t.Context(), "warm", tpl); err != nil {
		t.Fatal(err)
	}
	entered, release := holdCreates(f, "a", "b")
	errs := make(chan error, 2)
	go func() { _, err := m.Ensure(t.Context(), "a", tpl); errs <- err }()
	<-entered // a holds the only slot
	go func() { _, err := m.Ensure(t.Context(), "b", tpl); errs <- err }()
	for len(m.starts.queued) == 0 { // b waits in the queue
		goruntime.Gosched()
	}
	if _, err := m.Ensure(t.Context(), "c", tpl); !errors.Is(err, ErrCapacity) {
		t.Errorf("c: got %v, want ErrCapacity (queue full)", err)
	}
	// A running sandbox never waits for a slot.
	if _, err := m.Ensure(t.Context(), "warm", tpl); err != nil {
		t.Errorf("warm: got %v, want its endpoint", err)
	}
	release("a")
	release("b")
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("got %v, want a and b created", err)
		}
	}
}

// Time waiting for a start slot does not count against the ready timeout:
// a wake queued longer than its ready timeout still starts once a slot
// frees; one that finds no slot within the queue timeout is capacity (503
// upstream), not an app that failed to become ready (504).
func TestStartSlotWaitIsNotReadyTime(t *testing.T) {
	m, f := newFakeManager(t, Config{MaxConcurrentStarts: 1, StartQueueTimeout: time.Second})
	tpl := appListener(t)
	entered, release := holdCreates(f, "a", "c")
	errs := make(chan error, 1)
	go func() { _, err := m.Ensure(t.Context(), "a", tpl); errs <- err }()
	<-entered // a holds the only slot
	short := *tpl
	short.Ready.Timeout = config.Duration(100 * time.Millisecond)
	time.AfterFunc(400*time.Millisecond, func() { release("a") })
	if _, err := m.Ensure(t.Context(), "b", &short); err != nil {
		t.Errorf("b (queued 400 ms, ready timeout 100 ms): got %v, want created", err)
	}
	if err := <-errs; err != nil {
		t.Errorf("a: got %v, want created", err)
	}

	defer release("c")
	go func() { _, err := m.Ensure(t.Context(), "c", tpl); errs <- err }()
	<-entered // c holds the only slot
	_, err := m.Ensure(t.Context(), "d", &short)
	if !errors.Is(err, ErrCapacity) || errors.Is(err, ErrNotReady) {
		t.Errorf("d (no slot within the queue timeout): got %v, want ErrCapacity and not ErrNotReady", err)
	}
}

func TestReadyClock(t *testing.T) {
	fired := make(chan time.Time, 1)
	t0 := time.Now()
	c := startReadyClock(400*time.Millisecond, func() { fired <- time.Now() })
	time.Sleep(50 * time.Millisecond) // well before it would fire, even on a loaded machine
	c.pause()
	if c.left > 350*time.Millisecond || c.left <= 0 {
		t.Fatalf("paused with %v left, want 400 ms less the 50 ms it ran", c.left)
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case <-fired:
		t.Fatal("fired while paused")
	default:
	}
	c.resume()
	at := <-fired
	if took := at.Sub(t0); took < 600*time.Millisecond {
		t.Errorf("fired after %v, want 400 ms of running time plus 200 ms paused", took)
	}
	c.pause() // a pause and resume after it fired do not restart it
	c.resume()
	if c.t.Stop() {
		t.Error("resume after firing armed the timer again")
	}
}

// staleList answers its first List with what the engine had when called,
// once released: a recount whose list was taken before a start.
type staleList struct {
	*fakeEngine
	listed, release chan struct{}
	once            sync.Once
}

func (s *staleList) List(ctx context.Context, labels map[string]string) ([]runtime.Instance, error) {
	list, err := s.fakeEngine.List(ctx, labels)
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.listed)
		<-s.release
	}
	return list, err
}

// TestCapacityRecountNotStale: a recount whose list was taken before a
// start ended does not count that sandbox stopped again, which would let
// one more start than MaxRunning.
func TestCapacityRecountNotStale(t *testing.T) {
	t.Parallel()
	f := &staleList{fakeEngine: newFake(), listed: make(chan struct{}), release: make(chan struct{})}
	m := New(Config{MaxRunning: 1}, f, nil, nil)
	t.Cleanup(func() { m.Close() })
	tpl := appListener(t)
	recounted := make(chan error, 1)
	go func() { recounted <- m.refreshStates(t.Context()) }()
	<-f.listed // the list has no a
	if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
		t.Fatal(err)
	}
	close(f.release)
	if err := <-recounted; err != nil {
		t.Fatal(err)
	}
	if _, err := m.Ensure(t.Context(), "b", tpl); !errors.Is(err, ErrCapacity) {
		t.Fatalf("b after a stale recount: got %v, want ErrCapacity (a runs, cap 1)", err)
	}
}
