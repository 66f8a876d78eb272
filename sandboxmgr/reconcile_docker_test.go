package sandboxmgr_test

import (
	"maps"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A gateway killed between create and start leaves a container that was
// never started. Start removes it; the next Ensure makes exactly one.
func TestDockerStartRemovesHalfMade(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := newID()
	tpl := testTemplate(t, nil)
	labels := maps.Clone(e.cfg.Labels)
	labels[runtime.LabelManaged] = "true"
	labels[runtime.LabelSandbox] = id
	labels[runtime.LabelTemplate] = tpl.Name
	_, err := e.cli.ContainerCreate(t.Context(), &container.Config{Image: tpl.Image, Labels: labels},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, e.name(id))
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.StaleCreate = -1 // any age: the test cannot wait two minutes
	m := e.manager(t)
	if n := len(e.containers(t, id)); n != 0 {
		t.Fatalf("got %d containers after Start, want the half-made one removed", n)
	}
	ep, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatal(err)
	}
	get(t, ep)
	if n := len(e.containers(t, id)); n != 1 {
		t.Errorf("got %d containers, want 1", n)
	}
}
