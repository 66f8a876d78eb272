package config

import (
	"strings"
	"testing"
)

// A template's workspace (#15): Kubernetes only, a size of at least 1MiB,
// a clean absolute mount path, an optional storage class, no warm pool.
// Every mistake of a file is reported in one pass, at its own position.
func TestWorkspaceValidation(t *testing.T) {
	t.Parallel()
	const kube = "runtime:\n  kind: kubernetes\n"
	base := func(runtime, workspace string) string {
		return `domain: preview.localhost
auth:
  audience: a
  issuers: [x]
  keys: [{kid: k1, alg: HS256, secret: 0123456789abcdef0123456789abcdef}]
` + runtime + `default_template: app
templates:
  app:
    image: x
` + workspace
	}
	tests := []struct {
		name, runtime, workspace string
		want                     []string // "LINE:COL: text" each; none for valid
	}{
		{"none", "", "", nil},
		{"kubernetes", kube, "    workspace: {size: 10Gi, path: /workspace, storage_class: fast-ssd}\n", nil},
		{"read only elsewhere", kube, "    read_only: true\n    workspace: {size: 1MiB, path: /tmp/work}\n", nil},
		{"docker runtime", "", "    workspace: {size: 1Gi, path: /w}\n",
			[]string{"10:16: templates.app.workspace: workspace needs runtime kind kubernetes"}},
		{"no size", kube, "    workspace: {path: /w}\n",
			[]string{"12:16: templates.app.workspace: workspace size must be at least 1MiB, got 0"}},
		{"small size", kube, "    workspace:\n      size: 512KiB\n      path: /w\n",
			[]string{"13:13: templates.app.workspace.size: workspace size must be at least 1MiB, got 512KiB"}},
		{"bad size", kube, "    workspace: {size: 10 gigs, path: /w}\n",
			[]string{`12:23: templates.app.workspace.size: invalid size "10 gigs"`}},
		{"no path", kube, "    workspace: {size: 1Gi}\n",
			[]string{"12:16: templates.app.workspace: workspace needs a path"}},
		{"relative path", kube, "    workspace: {size: 1Gi, path: work}\n",
			[]string{`12:34: templates.app.workspace.path: workspace path "work" must be absolute and clean`}},
		{"unclean path", kube, "    workspace: {size: 1Gi, path: /a/../b}\n",
			[]string{`12:34: templates.app.workspace.path: workspace path "/a/../b" must be absolute and clean`}},
		{"root", kube, "    workspace: {size: 1Gi, path: /}\n",
			[]string{"12:34: templates.app.workspace.path: workspace path must not be /"}},
		{"proc", kube, "    workspace: {size: 1Gi, path: /proc/x}\n",
			[]string{`12:34: templates.app.workspace.path: workspace path "/proc/x" is in /proc`}},
		{"tmp of read_only", kube, "    read_only: true\n    workspace: {size: 1Gi, path: /tmp}\n",
			[]string{"13:34: templates.app.workspace.path: workspace path /tmp is taken by the tmpfs of read_only"}},
		{"storage class", kube, "    workspace: {size: 1Gi, path: /w, storage_class: Fast_SSD}\n",
			[]string{`12:53: templates.app.workspace.storage_class: invalid storage_class "Fast_SSD"`}},
		{"pool", kube, "    pool: 2\n    workspace: {size: 1Gi, path: /w}\n",
			[]string{"12:11: templates.app.pool: pool cannot be used with a workspace"}},
		{"unknown key", kube, "    workspace: {size: 1Gi, path: /w, class: x}\n",
			[]string{`12:38: templates.app.workspace: unknown key "class"`}},
		{"all at once", "", "    pool: 1\n    workspace: {size: 1, path: w, storage_class: -x}\n",
			[]string{
				"11:16: templates.app.workspace: workspace needs runtime kind kubernetes",
				"11:23: templates.app.workspace.size: workspace size must be at least 1MiB",
				`11:32: templates.app.workspace.path: workspace path "w" must be absolute`,
				`11:50: templates.app.workspace.storage_class: invalid storage_class "-x"`,
				"10:11: templates.app.pool: pool cannot be used with a workspace",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("cfg.yaml", []byte(base(tc.runtime, tc.workspace)))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				if tc.workspace != "" && c.Templates["app"].Workspace == nil {
					t.Fatal("got no workspace, want one")
				}
				return
			}
			if err == nil {
				t.Fatalf("got valid, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), "cfg.yaml:"+w) {
					t.Errorf("got %v, want cfg.yaml:%s", err, w)
				}
			}
			if n := strings.Count(err.Error(), "cfg.yaml:"); n != len(tc.want) {
				t.Errorf("got %d errors (%v), want %d", n, err, len(tc.want))
			}
		})
	}
}

// The parsed workspace, and that it survives the redacted round trip the
// admin API makes.
func TestWorkspaceParsed(t *testing.T) {
	t.Parallel()
	c, err := Parse("cfg.yaml", []byte(`domain: preview.localhost
auth:
  keys: [{kid: k1, alg: HS256, secret: 0123456789abcdef0123456789abcdef}]
runtime: {kind: kubernetes}
templates:
  app:
    image: x
    workspace: {size: 10Gi, path: /workspace, storage_class: standard}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Workspace{Size: 10 << 30, Path: "/workspace", StorageClass: "standard"}
	if got := c.Templates["app"].Workspace; got == nil || *got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	c2, _, err := ParseUpdate("cfg.yaml", out, c)
	if err != nil {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
	if got := c2.Templates["app"].Workspace; got == nil || *got != want {
		t.Errorf("after the round trip got %+v, want %+v", got, want)
	}
}
