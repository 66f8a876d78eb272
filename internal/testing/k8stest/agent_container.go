package k8stest

import (
	"context"
	"fmt"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	corev1 "k8s.io/api/core/v1"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// startContainer creates and starts c of pod as a Docker container: image,
// command, args, env, user, capabilities, no-new-privileges, claim
// volumes; on the agent's network, labelled for cleanup.
func (a *Agent) startContainer(ctx context.Context, pod *corev1.Pod, c corev1.Container) (string, error) {
	cfg := &container.Config{Image: c.Image, Labels: dockertest.Labels()}
	cfg.Labels["previewgate.test.pod"] = string(pod.UID)
	if len(c.Command) > 0 {
		cfg.Entrypoint = c.Command
	}
	cfg.Cmd = c.Args
	for _, e := range c.Env {
		cfg.Env = append(cfg.Env, e.Name+"="+e.Value)
	}
	mounts, fsGroup, err := a.podMounts(ctx, pod, c)
	if err != nil {
		return "", err // stays Pending until its claims are there
	}
	host := &container.HostConfig{Mounts: mounts}
	if fsGroup != nil {
		host.GroupAdd = []string{strconv.FormatInt(*fsGroup, 10)}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			cfg.User = strconv.FormatInt(*sc.RunAsUser, 10)
		}
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			host.SecurityOpt = append(host.SecurityOpt, "no-new-privileges")
		}
		if sc.Capabilities != nil {
			for _, d := range sc.Capabilities.Drop {
				host.CapDrop = append(host.CapDrop, string(d))
			}
			for _, d := range sc.Capabilities.Add {
				host.CapAdd = append(host.CapAdd, string(d))
			}
		}
	}
	created, err := a.docker.ContainerCreate(ctx, cfg, host, &network.NetworkingConfig{
		EndpointsConfig: map[string]*network.EndpointSettings{a.network: {}},
	}, nil, fmt.Sprintf("k8stest-%s-%s", pod.Name, pod.UID[:8]))
	if err != nil {
		return "", fmt.Errorf("create container: %w", err)
	}
	ctrID := created.ID
	if fsGroup != nil {
		if err := a.applyFSGroup(ctx, ctrID, mounts, *fsGroup); err != nil {
			_ = a.docker.ContainerRemove(context.WithoutCancel(ctx), ctrID, container.RemoveOptions{Force: true})
			return "", err
		}
	}
	a.mu.Lock()
	a.ctrs[pod.UID] = ctrID
	a.mu.Unlock()
	if err := a.docker.ContainerStart(ctx, ctrID, container.StartOptions{}); err != nil {
		return "", fmt.Errorf("start container: %w", err)
	}
	return ctrID, nil
}
