package docker

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"testing"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestDockerConfig: the isolation defaults a spec becomes (#7).
func TestDockerConfig(t *testing.T) {
	s := runtime.Spec{Name: "previewgate-abc", Image: "img:1", Cmd: []string{"serve"}, Env: []string{"A=1", "B=2"},
		Labels:  map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: "abc"},
		Network: "pg", Memory: 256 << 20, CPUs: 0.5, Pids: 100, CapAdd: []string{"NET_BIND_SERVICE"}, ReadOnly: true}
	cfg, host, nc := dockerConfig(s)
	checks := []struct {
		name      string
		got, want any
	}{
		{"image", cfg.Image, "img:1"},
		{"cmd", fmt.Sprint(cfg.Cmd), "[serve]"},
		{"env", fmt.Sprint(cfg.Env), "[A=1 B=2]"},
		{"labels", cfg.Labels[runtime.LabelSandbox], "abc"},
		{"no published ports", len(host.PortBindings) + len(cfg.ExposedPorts), 0},
		{"no mounts", len(host.Mounts) + len(host.Binds) + len(host.VolumesFrom), 0},
		{"network", string(host.NetworkMode), "pg"},
		{"endpoint", len(nc.EndpointsConfig["pg"].Aliases), 0},
		{"no-new-privileges", fmt.Sprint(host.SecurityOpt), "[no-new-privileges:true]"},
		{"cap drop", fmt.Sprint(host.CapDrop), "[ALL]"},
		{"cap add", fmt.Sprint(host.CapAdd), "[NET_BIND_SERVICE]"},
		{"memory", host.Memory, int64(256 << 20)},
		{"cpus", host.NanoCPUs, int64(5e8)},
		{"pids", *host.PidsLimit, int64(100)},
		{"read-only", host.ReadonlyRootfs, true},
		{"tmpfs", slices.Collect(maps.Keys(host.Tmpfs)), []string{"/tmp"}},
		{"not privileged", host.Privileged, false},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestClassify(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"dial error", &net.OpError{Op: "dial", Net: "unix", Err: errors.New("no such file")}, runtime.ErrUnavailable},
		{"other", errBoom, errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify("op", tc.err, runtime.ErrNotFound); !errors.Is(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
