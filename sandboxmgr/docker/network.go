package docker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The sandboxes' network. Docker does not keep network names unique:
// gateways starting together each create "previewgate", and then every
// create naming it fails as ambiguous. So Isolate picks, the same way in
// every gateway, the oldest (then lowest ID) of that exact name, removes
// the others without containers, and creates join the kept one by ID.

// networks maps a network name to the ID of the network Isolate kept.
type networks struct {
	mu  sync.Mutex // guards ids
	ids map[string]string
}

func (e *Runtime) networkID(name string) string {
	e.nets.mu.Lock()
	defer e.nets.mu.Unlock()
	return e.nets.ids[name]
}

// netSettle is how long Isolate lets racing creates land before it picks.
const netSettle = 500 * time.Millisecond

// Isolate makes the bridge network name exist, without inter-container
// traffic, and picks the one of that name new sandboxes join.
func (e *Runtime) Isolate(ctx context.Context, name string, labels map[string]string) error {
	// One network of the name, in one call (which also settles the
	// client's API version, read unguarded by the SDK's list calls).
	if n, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{}); err == nil && n.Name == name {
		e.keepNetwork(name, n.ID)
		return nil
	}
	nets, err := e.networksNamed(ctx, name)
	if err != nil {
		return err
	}
	if len(nets) == 0 {
		_, err := e.cli.NetworkCreate(ctx, name, network.CreateOptions{
			Driver: "bridge",
			// Sandboxes must not reach each other.
			Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
			Labels:  labels,
		})
		if err != nil && !cerrdefs.IsConflict(err) {
			return classify("create network "+name, err, nil)
		}
		if err := runtime.Sleep(ctx, netSettle); err != nil {
			return fmt.Errorf("create network %s: %w", name, err)
		}
		if nets, err = e.networksNamed(ctx, name); err != nil {
			return err
		}
		if len(nets) == 0 {
			return fmt.Errorf("create network %s: %w (removed right after its create)", name, runtime.ErrNoNetwork)
		}
	}
	if len(nets) > 1 {
		e.dropDuplicates(ctx, name, nets[1:])
	}
	e.keepNetwork(name, nets[0].ID)
	return nil
}

func (e *Runtime) keepNetwork(name, id string) {
	e.nets.mu.Lock()
	defer e.nets.mu.Unlock()
	if e.nets.ids == nil {
		e.nets.ids = make(map[string]string)
	}
	e.nets.ids[name] = id
}

// networksNamed lists the networks named exactly name, the one to keep
// first: the oldest, then the lowest ID.
func (e *Runtime) networksNamed(ctx context.Context, name string) ([]network.Summary, error) {
	list, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, classify("list networks "+name, err, nil)
	}
	list = slices.DeleteFunc(list, func(n network.Summary) bool { return n.Name != name })
	slices.SortFunc(list, func(a, b network.Summary) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return list, nil
}

// dropDuplicates removes the networks dups that no container, running or
// not, is on (a stopped container's removed network would keep it from
// starting). Failing is no error: creates join the kept one by ID.
func (e *Runtime) dropDuplicates(ctx context.Context, name string, dups []network.Summary) {
	on, err := e.cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("network", name))})
	if err != nil {
		return
	}
	busy := make(map[string]bool)
	for _, c := range on {
		busy[c.HostConfig.NetworkMode] = true
		if c.NetworkSettings != nil {
			if ep := c.NetworkSettings.Networks[name]; ep != nil {
				busy[ep.NetworkID] = true
			}
		}
	}
	for _, n := range dups {
		if !busy[n.ID] {
			_ = e.cli.NetworkRemove(ctx, n.ID)
		}
	}
}
