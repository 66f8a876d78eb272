package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// Labels on everything the bench creates, so cleanup removes exactly this
// run's objects (and `docker ps --filter label=previewgate.bench` finds
// leftovers of a killed run).
const (
	labelBench = "previewgate.bench"
	labelRun   = "previewgate.bench.run"
)

func benchLabels(run string) map[string]string {
	return map[string]string{labelBench: "1", labelRun: run}
}

// rawContainer is a container the bench drives itself, the way a minimal
// orchestrator would: the baseline for the gateway's cold-start rows.
type rawContainer struct {
	c       *client.Client
	name    string
	network string
}

func (r *rawContainer) create(ctx context.Context, img string, labels map[string]string) error {
	_, err := r.c.ContainerCreate(ctx, &container.Config{Image: img, Labels: labels, Env: []string{"WS_PUSH=1h"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(r.network)},
		&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{r.network: {}}}, nil, r.name)
	return err
}

// startAndServe starts the container, finds its address and waits until
// its app answers a GET: what any orchestrator must do at the least.
func (r *rawContainer) startAndServe(ctx context.Context) error {
	if err := r.c.ContainerStart(ctx, r.name, container.StartOptions{}); err != nil {
		return err
	}
	addr, err := r.address(ctx)
	if err != nil {
		return err
	}
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return firstByte(addr, "raw", "/")
}

// address is the container's app address on the bench network.
func (r *rawContainer) address(ctx context.Context) (string, error) {
	ci, err := r.c.ContainerInspect(ctx, r.name)
	if err != nil {
		return "", err
	}
	ep := ci.NetworkSettings.Networks[r.network]
	if ep == nil || ep.IPAddress == "" {
		return "", fmt.Errorf("%s has no address on %s", r.name, r.network)
	}
	return net.JoinHostPort(ep.IPAddress, "3000"), nil
}

// rename renames the container, as a pool claim does.
func (r *rawContainer) rename(ctx context.Context, name string) error {
	if err := r.c.ContainerRename(ctx, r.name, name); err != nil {
		return err
	}
	r.name = name
	return nil
}

func (r *rawContainer) stop(ctx context.Context) error {
	t := 10
	return r.c.ContainerStop(ctx, r.name, container.StopOptions{Timeout: &t})
}

func (r *rawContainer) remove(ctx context.Context) error {
	return r.c.ContainerRemove(ctx, r.name, container.RemoveOptions{Force: true})
}

// firstByte sends one GET on a new connection and reads the status line.
// header holds extra header lines ("Cookie: ...").
func firstByte(addr, host, path string, header ...string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(90 * time.Second))
	extra := ""
	for _, h := range header {
		extra += h + "\r\n"
	}
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+host+"\r\n"+extra+"Connection: close\r\n\r\n"); err != nil {
		return err
	}
	buf := make([]byte, 12)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf[9:12]) != "200" {
		return fmt.Errorf("status %q", buf)
	}
	return nil
}

// containerPID is the host pid of a container's main process (0 if unknown),
// for reading its CPU time from /proc.
func containerPID(ctx context.Context, c *client.Client, name string) int {
	ci, err := c.ContainerInspect(ctx, name)
	if err != nil || ci.State == nil {
		return 0
	}
	return ci.State.Pid
}

// countContainers counts this run's containers for a sandbox id.
func countContainers(ctx context.Context, c *client.Client, run, sandbox string) (int, error) {
	f := filters.NewArgs(filters.Arg("label", labelRun+"="+run), filters.Arg("label", "previewgate.sandbox="+sandbox))
	list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	return len(list), err
}

// cleanupDocker removes this run's containers, network and images.
func cleanupDocker(c *client.Client, run, netName string, tags ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", labelRun+"="+run))
	list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	errs := []error{err}
	for _, ct := range list {
		if err := c.ContainerRemove(ctx, ct.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := c.NetworkRemove(ctx, netName); err != nil && !cerrdefs.IsNotFound(err) {
		errs = append(errs, err)
	}
	for _, tag := range tags {
		if tag == "" {
			continue
		}
		if _, err := c.ImageRemove(ctx, tag, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
