package sandboxmgr

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestEnsureDeadInstanceNotCachedOnReusedAddress (attack21): a sandbox
// whose container dies while its app is probed (a hostile app exits right
// after start) leaves its address free; Docker gives it to the next
// container at once, and when that one's app answers the probe within the
// 500 ms between liveness checks, the dead sandbox's wake succeeded on
// another sandbox's app: its endpoint is cached there and its users are
// served by the other sandbox (until an event or the re-check notices,
// which for a die seen before the endpoint was cached is the re-check). A
// wake must not hand out an endpoint of an instance that no longer runs.
func TestEnsureDeadInstanceNotCachedOnReusedAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, ps, _ := net.SplitHostPort(l.Addr().String())
	l.Close() // nothing answers on A's address yet
	port, _ := strconv.Atoi(ps)
	tpl := &config.Template{Name: "fake", Image: "fake:latest", Port: port, Ready: config.Ready{Timeout: config.Duration(3 * time.Second)}}
	m, f := newFakeManager(t, Config{Templates: func(string) *config.Template { return tpl }})
	f.put(ContainerName("a"), runtime.StateExited, map[string]string{runtime.LabelPort: ps, runtime.LabelTemplate: "fake"})

	type result struct {
		ep  Endpoint
		err error
	}
	done := make(chan result, 1)
	go func() {
		ep, err := m.Ensure(t.Context(), "a", tpl)
		done <- result{ep, err}
	}()
	for f.state(ContainerName("a")) != runtime.StateRunning {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // A's app is being probed
	// A's app exits; the address goes to B, whose app answers at once.
	f.setState(ContainerName("a"), runtime.StateRunning, runtime.StateExited)
	b, err := net.Listen("tcp", "127.0.0.1:"+ps)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	go func() {
		for {
			c, err := b.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	r := <-done
	if r.err == nil {
		t.Fatalf("Ensure(a) returned endpoint %+v of a container that exited during its probe (its address answered for someone else)", r.ep)
	}
	if ep, ok := cached(m, "a"); ok {
		t.Fatalf("cached endpoint %+v for an exited container", ep)
	}
}

// slowListEngine holds its first List after taking the snapshot, until
// gate is closed.
type slowListEngine struct {
	*fakeEngine
	first   sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (s *slowListEngine) List(ctx context.Context, labels map[string]string) ([]runtime.Instance, error) {
	list, err := s.fakeEngine.List(ctx, labels)
	s.first.Do(func() {
		close(s.entered)
		<-s.gate
	})
	return list, err
}

// TestRecheckKeepsWhatWasCachedAfterItsList (attack21): the re-check
// compares the cache with a list taken before it locks the manager. A
// sandbox created (and cached) between the list and the lock is not in
// that list: the re-check dropped its healthy endpoint (its pooled
// connections closed as "gone") and forgot its container, so Known said
// it did not exist (anonymous visitors of a public one got 401
// no_sandbox) until the next re-check.
func TestRecheckKeepsWhatWasCachedAfterItsList(t *testing.T) {
	tpl := appListener(t)
	s := &slowListEngine{fakeEngine: newFake(), entered: make(chan struct{}), gate: make(chan struct{})}
	m := New(Config{Templates: func(string) *config.Template { return tpl }, RecheckEvery: time.Hour}, s, nil, nil)
	t.Cleanup(func() { m.Close() })
	done := make(chan error, 1)
	go func() { done <- m.recheck(context.Background()) }()
	<-s.entered // the list is taken: no sandbox "a" in it
	if _, err := m.Ensure(t.Context(), "a", tpl); err != nil {
		t.Fatal(err)
	}
	close(s.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := cached(m, "a"); !ok {
		t.Errorf("the re-check dropped the endpoint of a sandbox cached after its list was taken")
	}
	if _, ok := known(m, "a"); !ok {
		t.Errorf("the re-check forgot the container of a sandbox created after its list was taken")
	}
}

// TestSandboxIDNeverNamesPoolContainer (attack21): warm pool containers
// are named previewgate-pool-<template>-<hex>, sandboxes previewgate-<id>,
// and "pool-<template>-<hex>" is a valid id. Ensure for that id served the
// unclaimed pool container as if it were that sandbox's, while the pool
// still offered it: the next new sandbox claimed the very container, and
// two sandboxes were served by one container.
func TestSandboxIDNeverNamesPoolContainer(t *testing.T) {
	tpl := appListener(t)
	tpl.Pool = 1
	cfg := Config{
		ListTemplates: func() []*config.Template { return []*config.Template{tpl} },
		Templates:     func(string) *config.Template { return tpl },
		PoolEvery:     10 * time.Millisecond,
		ReapEvery:     -1,
	}
	f := newFake()
	m := New(cfg, f, nil, nil)
	defer m.Close()
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m, tpl.Name, 1)
	var poolName string
	f.mu.Lock()
	for name := range f.ctrs {
		poolName = name
	}
	f.mu.Unlock()
	id := strings.TrimPrefix(poolName, "previewgate-") // its name as an earlier version's: runtime.LegacyName(id)
	ep, err := m.Ensure(t.Context(), id, tpl)
	if err == nil && instanceContainer(ep.Instance) == "id-"+poolName && f.state(poolName) != "" {
		t.Errorf("sandbox %q is served by the unclaimed pool container %s", id, poolName)
	}
}
