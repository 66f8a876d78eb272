package sandboxmgr

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/config"
)

func TestSpecAndDockerConfig(t *testing.T) {
	m := newManager(Config{Network: "pg", Labels: map[string]string{"team": "x", LabelSandbox: "spoof"}}, nil, newFake())
	defer m.Close()
	tpl := &config.Template{
		Name: "web", Image: "img:1", Port: 8080, Cmd: []string{"serve"},
		Env:    map[string]string{"B": "2", "A": "1"},
		Memory: 256 << 20, CPUs: 0.5, Pids: 100, CapAdd: []string{"NET_BIND_SERVICE"}, ReadOnly: true,
	}
	s, err := m.spec("abc", tpl)
	if err != nil {
		t.Fatal(err)
	}
	cfg, host, nc := dockerConfig(s)
	checks := []struct {
		name      string
		got, want any
	}{
		{"name", s.Name, "previewgate-abc"},
		{"image", cfg.Image, "img:1"},
		{"cmd", fmt.Sprint(cfg.Cmd), "[serve]"},
		{"env", fmt.Sprint(cfg.Env), "[A=1 B=2]"},
		{"label managed", cfg.Labels[LabelManaged], "true"},
		{"label sandbox (not spoofable by cfg.Labels)", cfg.Labels[LabelSandbox], "abc"},
		{"label template", cfg.Labels[LabelTemplate], "web"},
		{"label port", cfg.Labels[LabelPort], "8080"},
		{"extra label", cfg.Labels["team"], "x"},
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
	if _, err := m.spec("abc", &config.Template{Name: "empty"}); err == nil {
		t.Error("got no error for a template without image")
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"dial error", &net.OpError{Op: "dial", Net: "unix", Err: errors.New("no such file")}, ErrUnavailable},
		{"other", errBoom, errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify("op", tc.err, ErrNoContainer); !errors.Is(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "abc-123": true, strings.Repeat("a", 55): true,
		"": false, "-a": false, "a-": false, "A": false, "a_b": false, "a.b": false,
		strings.Repeat("a", 56): false, "../x": false, "a b": false,
	} {
		if got := config.ValidID(id); got != want {
			t.Errorf("ValidID(%q): got %v, want %v", id, got, want)
		}
	}
}

func FuzzValidID(f *testing.F) {
	for _, s := range []string{"a", "abc-1", "-", "A", "\x00", "a/../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if config.ValidID(id) && !dockerName.MatchString(ContainerName(id)) {
			t.Errorf("valid id %q gives invalid container name", id)
		}
	})
}
