package sandboxmgr_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestDockerTwoScopesOneID, on the real engine: two gateway scopes'
// sandboxes of one id are two containers under two names, each serving
// its own app, each listed, stopped and removed by its own gateway only.
// (Both used to be previewgate-<id>: the second gateway met the first's
// container under its name and answered 409 foreign_container.)
func TestDockerTwoScopesOneID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tpl := testTemplate(t, nil)
	a := e.manager(t)
	other := *e
	other.cfg.Labels = dockertest.ScopedLabels()
	b := other.manager(t)
	id := newID()
	epA, err := a.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatal(err)
	}
	epB, err := b.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("the other scope's sandbox of the same id: %v", err)
	}
	if e.name(id) == other.name(id) || epA.Instance == epB.Instance || epA.Addr == epB.Addr {
		t.Fatalf("names %q %q, endpoints %+v %+v: want two instances", e.name(id), other.name(id), epA, epB)
	}
	get(t, epA)
	get(t, epB)
	if n := len(e.containers(t, id)); n != 2 {
		t.Errorf("containers of %s: %d, want 2", id, n)
	}
	for _, m := range []*mgrtest.Manager{a, b} {
		if list, err := m.List(t.Context()); err != nil || len(list) != 1 {
			t.Errorf("a scope lists %+v (%v), want its one sandbox", list, err)
		}
	}
	if err := b.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Cached(id); !ok || len(e.containers(t, id)) != 1 {
		t.Errorf("the other scope's remove: %d containers left, a's cached: %v; want a's left alone", len(e.containers(t, id)), ok)
	}
}

// TestDockerLegacyNameAdopted, on the real engine: a container an earlier
// version named previewgate-<id> is adopted by a gateway of its scope
// after an upgrade (a restart loses nothing): found at Start, woken and
// stopped as it is, never doubled by a create under the new name.
func TestDockerLegacyNameAdopted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tpl := testTemplate(t, nil)
	id := newID()
	old := e.manager(t)
	if _, err := old.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatal(err)
	}
	if err := old.Stop(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	old.Close()
	// What an earlier version left: the same container under the old name.
	if err := e.cli.ContainerRename(context.Background(), e.name(id), runtime.LegacyName(id)); err != nil {
		t.Fatal(err)
	}
	m := e.manager(t)
	if _, ok := m.Known(id); !ok {
		t.Error("Start did not adopt the legacy-named container")
	}
	ep, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatal(err)
	}
	get(t, ep)
	if cs := e.containers(t, id); len(cs) != 1 || cs[0].Names[0] != "/"+runtime.LegacyName(id) || cs[0].State != container.StateRunning {
		t.Fatalf("after the wake: %+v, want the legacy container alone, running", cs)
	}
	if err := m.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if n := len(e.containers(t, id)); n != 0 {
		t.Errorf("after Remove: %d containers, want none", n)
	}
}

// TestKubernetesTwoScopesOneID, on the real API server: two gateway
// scopes in one namespace make their sandboxes of one id as two pods
// with two Leases; each serves, lists and removes only its own. (Both
// used to be pod and Lease previewgate-<id>: the second scope's create
// lost the Lease to the first's pod for ever.)
func TestKubernetesTwoScopesOneID(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	other := e.config()
	other.Labels = maps.Clone(e.labels)
	other.Labels[runtime.LabelInstance] = "other-scope"
	a, b := e.manager(t, e.config()), e.manager(t, other)
	id := newID()
	epA, err := a.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatal(err)
	}
	epB, err := b.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("the other scope's sandbox of the same id: %v", err)
	}
	if epA.Instance == epB.Instance || len(e.pods(t, id)) != 2 {
		t.Fatalf("endpoints %+v %+v, %d pods: want two", epA, epB, len(e.pods(t, id)))
	}
	if err := b.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if pods := e.pods(t, id); len(pods) != 1 || pods[0].Name != e.name(id) {
		t.Errorf("after the other scope's remove: %d pods, want a's %s alone", len(pods), e.name(id))
	}
	if _, err := a.Ensure(t.Context(), id, tpl); err != nil {
		t.Errorf("a's sandbox after the other scope's remove: %v", err)
	}
}

// TestKubernetesPoolOfEachScope, on the real API server: two gateway
// scopes in one namespace both fill their warm pools. (The pool lock was
// one Lease for the namespace, previewgate.lock.pool: the scope whose
// replica held it kept every other scope's pool empty for ever.)
func TestKubernetesPoolOfEachScope(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := testTemplate(t, nil)
	tpl.Pool = 1
	cfg := e.config()
	cfg.PoolEvery = 100 * time.Millisecond
	cfg.ListTemplates = func() []*config.Template { return []*config.Template{tpl} }
	cfg.Templates = func(string) *config.Template { return tpl }
	other := cfg
	other.Labels = maps.Clone(e.labels)
	other.Labels[runtime.LabelInstance] = "other-scope"
	a, b := e.manager(t, cfg), e.manager(t, other)
	deadline := time.Now().Add(60 * time.Second)
	for a.PoolSize(tpl.Name) < 1 || b.PoolSize(tpl.Name) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("pools after 60s: %d and %d, want 1 each", a.PoolSize(tpl.Name), b.PoolSize(tpl.Name))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
