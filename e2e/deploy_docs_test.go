package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDeployRoleAsDocumented: docs/kubernetes.md lists the shipped Role's
// rules for operators who review RBAC before applying it. The list had
// drifted (no configmaps, pods/log, leases list or networkpolicies
// update), so a reviewer approved less than deploy/kubernetes/rbac.yaml
// grants. It must name each resource with exactly its verbs.
func TestDeployRoleAsDocumented(t *testing.T) {
	type role struct {
		Kind  string `yaml:"kind"`
		Rules []struct {
			Resources []string `yaml:"resources"`
			Verbs     []string `yaml:"verbs"`
		} `yaml:"rules"`
	}
	shipped := map[string]string{}
	for _, d := range readYAMLDocs[role](t, filepath.Join("deploy", "kubernetes", "rbac.yaml")) {
		if d.Kind != "Role" {
			continue
		}
		for _, r := range d.Rules {
			for _, res := range r.Resources {
				shipped[res] = strings.Join(r.Verbs, " ")
			}
		}
	}
	if len(shipped) == 0 {
		t.Fatal("deploy/kubernetes/rbac.yaml: no Role rules")
	}
	doc, err := os.ReadFile(filepath.Join("docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`a Role in the sandbox namespace only \(([^)]*)\)`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/kubernetes.md: no `a Role in the sandbox namespace only (...)` list")
	}
	documented := map[string]string{}
	for _, item := range strings.Split(strings.Join(strings.Fields(string(m[1])), " "), ";") {
		res, verbs, ok := strings.Cut(strings.TrimSpace(item), ": ")
		if !ok {
			t.Fatalf("docs/kubernetes.md: Role list item %q is not `resource: verbs`", item)
		}
		verbs, _, _ = strings.Cut(verbs, ",") // ", for workspaces"
		documented[res] = strings.TrimSpace(verbs)
	}
	for _, res := range slices.Sorted(maps.Keys(shipped)) {
		if documented[res] != shipped[res] {
			t.Errorf("docs/kubernetes.md: %s: got %q, want rbac.yaml's %q", res, documented[res], shipped[res])
		}
	}
	for res := range documented {
		if _, ok := shipped[res]; !ok {
			t.Errorf("docs/kubernetes.md names %s, which rbac.yaml's Role does not grant", res)
		}
	}
}
