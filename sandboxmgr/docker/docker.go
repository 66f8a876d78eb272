// Package docker is the Docker Engine runtime of the sandbox manager: a
// sandbox is a container named like runtime.Name on a bridge network
// without inter-container traffic. Labels are immutable, so a pool claim
// is a rename. It declares images, logs and pause as its capabilities. An
// engine is served by one gateway per scope, which Own makes sure of
// (own.go, lock.go); that gateway's requests are the whole truth about
// activity, and its records are kept in its data dir.
package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Options configure a Runtime.
type Options struct {
	Host        string        // zero: DOCKER_HOST or the default socket
	Network     string        // the sandboxes' network, where a container's IP is read first
	DialTimeout time.Duration // set by the manager's config; never zero
}

// Runtime is the Docker Engine runtime.
type Runtime struct {
	cli     *client.Client
	network string   // preferred network when reading a container's IP
	nets    networks // the network each name stands for (network.go)
}

// New connects lazily to the engine: it does not fail when it is down.
func New(o Options) (*Runtime, error) {
	cli, err := newDockerClient(o.Host, o.DialTimeout)
	if err != nil {
		return nil, err
	}
	return &Runtime{cli: cli, network: o.Network}, nil
}

// Close closes the client.
func (e *Runtime) Close() error { return e.cli.Close() }

// Capabilities: images built and checked on the engine, logs, a real
// pause. No records (the gateway keeps them in its data dir) and no shared
// activity (one gateway sees every request).
func (e *Runtime) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Images: images{e}, Logs: e, Pause: true}
}

// newDockerClient connects lazily to host (zero: DOCKER_HOST or the
// default socket), negotiating the API version. Dials time out after
// dialTimeout, so an engine that is down shows in about that time.
func newDockerClient(host string, dialTimeout time.Duration) (*client.Client, error) {
	if host == "" {
		host = os.Getenv(client.EnvOverrideHost)
	}
	if host == "" {
		host = client.DefaultDockerHost
	}
	u, err := client.ParseHostURL(host)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", host, err)
	}
	opts := []client.Opt{client.FromEnv, client.WithHost(host), client.WithAPIVersionNegotiation()}
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	if proto := map[string]string{"unix": "unix", "tcp": "tcp", "http": "tcp", "https": "tcp"}[u.Scheme]; proto != "" {
		opts = append(opts, client.WithDialContext(func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, proto, u.Host)
		}))
	}
	return client.NewClientWithOpts(opts...)
}

// classify maps SDK errors to the runtime's: connection failures to
// ErrUnavailable, "not found" to notFound (when non-nil).
func classify(op string, err, notFound error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var nerr net.Error
	if client.IsErrConnectionFailed(err) || errors.As(err, &nerr) {
		return fmt.Errorf("%s: %w: %v", op, runtime.ErrUnavailable, err)
	}
	if notFound != nil && cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%s: %w", op, notFound)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (e *Runtime) Ping(ctx context.Context) error {
	_, err := e.cli.Ping(ctx)
	return classify("ping docker", err, nil)
}

func (e *Runtime) Lookup(ctx context.Context, name string) (runtime.Instance, error) {
	r, err := e.cli.ContainerInspect(ctx, name)
	if err != nil {
		return runtime.Instance{}, classify("inspect "+name, err, runtime.ErrNotFound)
	}
	info := runtime.Instance{ID: r.ID, Name: trimSlash(r.Name)}
	if r.Config != nil {
		info.Labels = r.Config.Labels
		info.Image = r.Config.Image
	}
	if t, err := time.Parse(time.RFC3339Nano, r.Created); err == nil {
		info.Created = t
	}
	if r.State != nil {
		info.State = r.State.Status
		info.ExitCode = r.State.ExitCode
		info.OOMKilled = r.State.OOMKilled
		if t, err := time.Parse(time.RFC3339Nano, r.State.StartedAt); err == nil && t.Year() > 1 {
			info.StartedAt = t
		}
	}
	if r.NetworkSettings != nil {
		info.IP = pickIP(e.network, r.NetworkSettings.Networks)
	}
	return info, nil
}

func pickIP(preferred string, nets map[string]*network.EndpointSettings) string {
	if ep := nets[preferred]; ep != nil && ep.IPAddress != "" {
		return ep.IPAddress
	}
	for _, ep := range nets {
		if ep != nil && ep.IPAddress != "" {
			return ep.IPAddress
		}
	}
	return ""
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}

// dockerConfig turns a spec into the create request. Isolation (#7): no
// published ports or mounts, no-new-privileges, every capability dropped
// but the template's, limits, no restart policy (a crashed dev server
// stays down until the next request wakes it).
func dockerConfig(s runtime.Spec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	cfg := &container.Config{
		Image:  s.Image,
		Env:    s.Env,
		Labels: s.Labels,
	}
	if len(s.Cmd) > 0 {
		cfg.Cmd = s.Cmd
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.Network),
		SecurityOpt:    []string{"no-new-privileges:true"},
		CapDrop:        []string{"ALL"},
		CapAdd:         s.CapAdd,
		ReadonlyRootfs: s.ReadOnly,
		Resources: container.Resources{
			Memory:   s.Memory,
			NanoCPUs: int64(s.CPUs * 1e9),
		},
	}
	if s.Pids > 0 {
		host.Resources.PidsLimit = &s.Pids
	}
	if s.ReadOnly {
		host.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev"}
	}
	nc := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{s.Network: {}}}
	return cfg, host, nc
}

func (e *Runtime) Create(ctx context.Context, s runtime.Spec) (string, error) {
	if s.Workspace != nil {
		// Config refuses it; a gateway whose live config claims another
		// runtime must not lose files silently.
		return "", fmt.Errorf("create %s: a template's workspace needs the kubernetes runtime", s.Name)
	}
	if id := e.networkID(s.Network); id != "" {
		s.Network = id // by ID: a name shared by duplicates is ambiguous (network.go)
	}
	cfg, host, nc := dockerConfig(s)
	r, err := e.cli.ContainerCreate(ctx, cfg, host, nc, nil, s.Name)
	switch {
	case err == nil:
		return r.ID, nil
	case cerrdefs.IsConflict(err):
		return "", fmt.Errorf("create %s: %w", s.Name, runtime.ErrNameTaken)
	case cerrdefs.IsNotFound(err):
		// Besides the image, only the network can be missing: ask for the image.
		if ok, ierr := e.hasImage(ctx, s.Image); ierr == nil && !ok {
			return "", fmt.Errorf("create %s: %w: %q (nothing is pulled; build or load it first)", s.Name, runtime.ErrNoImage, s.Image)
		}
		return "", fmt.Errorf("create %s: %w", s.Name, runtime.ErrNoNetwork)
	}
	return "", classify("create "+s.Name, err, nil)
}

func (e *Runtime) Start(ctx context.Context, name string) error {
	return classify("start "+name, e.cli.ContainerStart(ctx, name, container.StartOptions{}), runtime.ErrNotFound)
}

func (e *Runtime) Resume(ctx context.Context, name string) error {
	return classify("unpause "+name, e.cli.ContainerUnpause(ctx, name), runtime.ErrNotFound)
}

func (e *Runtime) Claim(ctx context.Context, container, name string) error {
	err := e.cli.ContainerRename(ctx, container, name)
	if cerrdefs.IsConflict(err) {
		return fmt.Errorf("rename to %s: %w", name, runtime.ErrNameTaken)
	}
	return classify("rename to "+name, err, runtime.ErrNotFound)
}

// Sleep pauses, stops (10 s to SIGKILL) or kills container name.
func (e *Runtime) Sleep(ctx context.Context, name string, mode runtime.SleepMode) error {
	switch mode {
	case runtime.SleepPause:
		return classify("pause "+name, e.cli.ContainerPause(ctx, name), runtime.ErrNotFound)
	case runtime.SleepKill:
		return classify("kill "+name, e.cli.ContainerKill(ctx, name, "KILL"), runtime.ErrNotFound)
	}
	timeout := 10 // seconds before SIGKILL
	return classify("stop "+name, e.cli.ContainerStop(ctx, name, container.StopOptions{Timeout: &timeout}), runtime.ErrNotFound)
}

// removeWait bounds how long Remove waits for another removal of the
// same container to finish.
const removeWait = 30 * time.Second

func (e *Runtime) Remove(ctx context.Context, name string) error {
	err := e.cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true, RemoveVolumes: true})
	// "removal ... is already in progress" (a concurrent DELETE, a wake
	// removing what it made): done once that one is, up to removeWait.
	for end := time.Now().Add(removeWait); cerrdefs.IsConflict(err) && time.Now().Before(end); {
		select {
		case <-ctx.Done():
			return classify("remove "+name, ctx.Err(), nil)
		case <-time.After(50 * time.Millisecond):
		}
		if _, ierr := e.cli.ContainerInspect(ctx, name); cerrdefs.IsNotFound(ierr) {
			return nil
		}
	}
	return classify("remove "+name, err, runtime.ErrNotFound)
}

func (e *Runtime) List(ctx context.Context, labels map[string]string) ([]runtime.Instance, error) {
	f := filters.NewArgs()
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, classify("list containers", err, nil)
	}
	out := make([]runtime.Instance, 0, len(list))
	for _, c := range list {
		info := runtime.Instance{ID: c.ID, Labels: c.Labels, State: string(c.State), Created: time.Unix(c.Created, 0), Image: c.Image}
		if len(c.Names) > 0 {
			info.Name = trimSlash(c.Names[0])
		}
		if c.NetworkSettings != nil {
			info.IP = pickIP(e.network, c.NetworkSettings.Networks)
		}
		out = append(out, info)
	}
	return out, nil
}
