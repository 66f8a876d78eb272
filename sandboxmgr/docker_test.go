package sandboxmgr

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestSpec(t *testing.T) {
	m := New(Config{Network: "pg", Labels: map[string]string{"team": "x", runtime.LabelSandbox: "spoof"}}, newFake(), nil, nil)
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
	checks := []struct {
		name      string
		got, want any
	}{
		{"name", s.Name, runtime.Name(runtime.Stamp(map[string]string{"team": "x", runtime.LabelSandbox: "spoof"}), "abc")},
		{"image", s.Image, "img:1"},
		{"cmd", fmt.Sprint(s.Cmd), "[serve]"},
		{"env", fmt.Sprint(s.Env), "[A=1 B=2]"},
		{"label managed", s.Labels[runtime.LabelManaged], "true"},
		{"label sandbox (not spoofable by cfg.Labels)", s.Labels[runtime.LabelSandbox], "abc"},
		{"label template", s.Labels[runtime.LabelTemplate], "web"},
		{"label port", s.Labels[runtime.LabelPort], "8080"},
		{"label scope", s.Labels[runtime.LabelScope] != "", true},
		{"extra label", s.Labels["team"], "x"},
		{"network", s.Network, "pg"},
		{"cap add", fmt.Sprint(s.CapAdd), "[NET_BIND_SERVICE]"},
		{"memory", s.Memory, int64(256 << 20)},
		{"cpus", s.CPUs, 0.5},
		{"pids", s.Pids, int64(100)},
		{"read-only", s.ReadOnly, true},
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

var (
	dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)
	// kubeName: an RFC 1123 subdomain (a pod, claim or Lease name).
	kubeName = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)
)

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
	stamp := runtime.Stamp(map[string]string{"team": "x"})
	f.Fuzz(func(t *testing.T, id string) {
		if !config.ValidID(id) {
			return
		}
		for _, name := range []string{runtime.Name(stamp, id), runtime.LegacyName(id)} {
			if !dockerName.MatchString(name) || !kubeName.MatchString(name) {
				t.Errorf("valid id %q gives invalid instance name %q", id, name)
			}
			if got, ok := runtime.SandboxOf(name); !ok || got != id {
				t.Errorf("SandboxOf(%q): got %q %v, want %q", name, got, ok, id)
			}
		}
	})
}
