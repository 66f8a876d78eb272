package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// newRuntime is a Runtime of its own (its own client, as another gateway
// process has), closed when t ends.
func newRuntime(t *testing.T, network string) *Runtime {
	t.Helper()
	rt, err := New(Options{Network: network, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// networksNamed lists the networks named exactly name, by ID.
func networksNamed(t *testing.T, name string) []string {
	t.Helper()
	list, err := newRuntime(t, name).networksNamed(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range list {
		ids = append(ids, n.ID)
	}
	return ids
}

// create makes a container (not started) of image on network through rt
// and returns the ID of the network it joined.
func create(t *testing.T, ctx context.Context, rt *Runtime, image, net string) string {
	t.Helper()
	id, err := rt.Create(ctx, runtime.Spec{Name: runtime.Name(runtime.Stamp(dockertest.Labels()), dockertest.UniqueID("net")), Image: image, Network: net, Labels: dockertest.Labels()})
	if err != nil {
		t.Fatalf("create on network %s: %v", net, err)
	}
	c, err := rt.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return string(c.HostConfig.NetworkMode) // not started: its endpoint has no ID yet
}

// createDuplicate makes a network named name even if one exists, as
// engines of API 1.44 and later always do (and older ones in a race):
// the SDK asks older engines to refuse duplicates.
func createDuplicate(t *testing.T, cli *client.Client, name string) string {
	t.Helper()
	cli.NegotiateAPIVersion(context.Background())
	body, _ := json.Marshal(map[string]any{"Name": name, "Driver": "bridge", "CheckDuplicate": false, "Labels": dockertest.Labels()})
	u := "http://docker/v" + cli.ClientVersion() + "/networks/create"
	if h, _ := client.ParseHostURL(cli.DaemonHost()); h != nil && h.Scheme == "tcp" {
		u = "http://" + h.Host + "/v" + cli.ClientVersion() + "/networks/create"
	}
	resp, err := cli.HTTPClient().Post(u, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r network.CreateResponse
	if err := json.Unmarshal(raw, &r); err != nil || r.ID == "" {
		t.Fatalf("create network %s: %d %s", name, resp.StatusCode, raw)
	}
	return r.ID
}

// TestIsolateRace: gateways starting together on a fresh engine (here:
// runtimes with clients of their own) end with one network of the name,
// and creates through every one of them work. Each used to create its own
// network of the name; then every create answered "network is ambiguous".
func TestIsolateRace(t *testing.T) {
	t.Parallel()
	image := dockertest.TestAppImage(t) // built before the clock starts
	name := dockertest.Network(t)
	const n = 4
	rts := make([]*Runtime, n)
	for i := range rts {
		rts[i] = newRuntime(t, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i, rt := range rts {
		wg.Go(func() {
			<-start
			errs[i] = rt.Isolate(ctx, name, dockertest.Labels())
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Isolate %d: %v", i, err)
		}
	}
	ids := networksNamed(t, name)
	if len(ids) != 1 {
		t.Fatalf("networks named %s after %d concurrent Isolates: %d (%v), want 1", name, n, len(ids), ids)
	}
	for i, rt := range rts {
		if got := create(t, ctx, rt, image, name); got != ids[0] {
			t.Errorf("create through runtime %d joined network %s, want %s", i, got, ids[0])
		}
	}
}

// TestIsolateDuplicates: networks of the name made before (an older
// version's race) are resolved: the oldest is kept, an empty newer one
// removed, one with a container left alone, and creates join the oldest.
func TestIsolateDuplicates(t *testing.T) {
	t.Parallel()
	image := dockertest.TestAppImage(t)
	cli := dockertest.Client(t)
	name := dockertest.Network(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var made []string
	for range 3 {
		made = append(made, createDuplicate(t, cli, name))
		time.Sleep(10 * time.Millisecond) // distinct creation times
	}
	t.Cleanup(func() {
		for _, id := range made {
			_ = cli.NetworkRemove(context.Background(), id)
		}
	})
	oldest, empty, busy := made[0], made[1], made[2]
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Labels: dockertest.Labels()},
		&container.HostConfig{NetworkMode: container.NetworkMode(busy)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })

	rt := newRuntime(t, name)
	if err := rt.Isolate(ctx, name, dockertest.Labels()); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, id := range networksNamed(t, name) {
		left[id] = true
	}
	if len(left) != 2 || !left[oldest] || !left[busy] || left[empty] {
		t.Errorf("networks left: %v, want the oldest %s and the one with a container %s", left, oldest, busy)
	}
	if got := create(t, ctx, rt, image, name); got != oldest {
		t.Errorf("create joined network %s, want the oldest %s", got, oldest)
	}
	// A later Isolate (after a create found the network gone) agrees.
	if err := rt.Isolate(ctx, name, dockertest.Labels()); err != nil || rt.networkID(name) != oldest {
		t.Errorf("Isolate again: %v, keeps %s, want %s", err, rt.networkID(name), oldest)
	}
}
