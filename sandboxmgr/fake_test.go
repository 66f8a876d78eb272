package sandboxmgr

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
)

// fakeEngine keeps containers in memory. Every container's app is the
// test's listener on 127.0.0.1; states change only through the methods.
type fakeEngine struct {
	engine // methods a test does not need panic when called

	mu      sync.Mutex // guards ctrs
	ctrs    map[string]*ctrInfo
	creates atomic.Int64
	starts  atomic.Int64
	inspect atomic.Int64

	// createHook, if set, runs before Create takes effect; returning an
	// error fails the create.
	createHook func(ctx context.Context, s ctrSpec) error
	// events, if set, serves Events; unset, Events blocks until ctx ends.
	events func(ctx context.Context, since time.Time, fn func(ctrEvent)) error
	lists  atomic.Int64
}

func newFake() *fakeEngine { return &fakeEngine{ctrs: make(map[string]*ctrInfo)} }

func (f *fakeEngine) put(name, state string, labels map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctrs[name] = &ctrInfo{ID: "id-" + name, Name: name, State: state, Labels: labels, IP: "127.0.0.1"}
}

func (f *fakeEngine) state(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.ctrs[name]; c != nil {
		return c.State
	}
	return ""
}

func (f *fakeEngine) Ping(context.Context) error { return nil }

func (f *fakeEngine) Inspect(ctx context.Context, name string) (ctrInfo, error) {
	f.inspect.Add(1)
	if err := ctx.Err(); err != nil {
		return ctrInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.ctrs[name]
	if c == nil {
		return ctrInfo{}, ErrNoContainer
	}
	return *c, nil
}

func (f *fakeEngine) Create(ctx context.Context, s ctrSpec) error {
	if f.createHook != nil {
		if err := f.createHook(ctx, s); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctrs[s.Name] != nil {
		return errNameTaken
	}
	f.creates.Add(1)
	f.ctrs[s.Name] = &ctrInfo{ID: "id-" + s.Name, Name: s.Name, State: stateCreated, Labels: s.Labels, IP: "127.0.0.1", Image: s.Image}
	return nil
}

func (f *fakeEngine) setState(name, from, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.ctrs[name]
	if c == nil {
		return ErrNoContainer
	}
	if from == "" || c.State == from || (from == "startable" && (c.State == stateCreated || c.State == stateExited)) {
		c.State = to
	}
	return nil
}

func (f *fakeEngine) Start(_ context.Context, name string) error {
	f.starts.Add(1)
	return f.setState(name, "startable", stateRunning)
}

func (f *fakeEngine) Unpause(_ context.Context, name string) error {
	return f.setState(name, statePaused, stateRunning)
}

func (f *fakeEngine) Rename(_ context.Context, container, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.ctrs[container]
	if c == nil {
		return ErrNoContainer
	}
	if f.ctrs[name] != nil {
		return errNameTaken
	}
	delete(f.ctrs, container)
	c.Name = name
	f.ctrs[name] = c
	return nil
}

func (f *fakeEngine) Pause(_ context.Context, name string) error {
	return f.setState(name, stateRunning, statePaused)
}

func (f *fakeEngine) Stop(_ context.Context, name string) error {
	return f.setState(name, "", stateExited)
}

func (f *fakeEngine) Remove(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctrs[name] == nil {
		return ErrNoContainer
	}
	delete(f.ctrs, name)
	return nil
}

func (f *fakeEngine) Events(ctx context.Context, since time.Time, _ map[string]string, fn func(ctrEvent)) error {
	if f.events != nil {
		return f.events(ctx, since, fn)
	}
	<-ctx.Done()
	return ctx.Err()
}

func (f *fakeEngine) List(_ context.Context, labels map[string]string) ([]ctrInfo, error) {
	f.lists.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ctrInfo
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

func (f *fakeEngine) EnsureNetwork(context.Context, string, map[string]string) error { return nil }

// appListener serves TCP on 127.0.0.1 (accepting and closing) for the
// length of the test and returns a template pointing at it.
func appListener(t *testing.T) *config.Template {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	return &config.Template{Name: "fake", Image: "fake:latest", Port: p, Ready: config.Ready{Timeout: config.Duration(5e9)}}
}

func newFakeManager(t *testing.T, cfg Config) (*Manager, *fakeEngine) {
	t.Helper()
	f := newFake()
	m := newManager(cfg, nil, f)
	t.Cleanup(func() { m.Close() })
	return m, f
}
