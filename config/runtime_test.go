package config

import (
	"strings"
	"testing"
)

func TestRuntimeValidation(t *testing.T) {
	t.Parallel()
	base := `domain: preview.localhost
auth:
  audience: a
  issuers: [x]
  keys: [{kid: k1, alg: HS256, secret: 0123456789abcdef0123456789abcdef}]
default_template: app
templates:
  app: {image: x}
`
	tests := []struct {
		name, yaml, want string // want: "" for valid, else "LINE:COL: text"
	}{
		{"default docker", "", ""},
		{"kubernetes", "runtime:\n  kind: kubernetes\n  kubernetes: {namespace: sbx, in_cluster: true, gateway_labels: [app=pg], activity_every: 5s}\n", ""},
		{"unknown kind", "runtime:\n  kind: nomad\n", "10:9: runtime.kind: invalid runtime kind"},
		{"bad namespace", "runtime:\n  kind: kubernetes\n  kubernetes:\n    namespace: Bad_NS\n", "12:16: runtime.kubernetes.namespace: invalid namespace"},
		{"bad label", "runtime:\n  kind: kubernetes\n  kubernetes:\n    gateway_labels: [nolabel]\n", "12:22: runtime.kubernetes.gateway_labels[0]: invalid gateway label"},
		{"both", "runtime:\n  kind: kubernetes\n  kubernetes: {in_cluster: true, kubeconfig: /k}\n", "11:46: runtime.kubernetes.kubeconfig: set in_cluster or kubeconfig"},
		{"unknown key", "runtime:\n  kind: kubernetes\n  kubernetes: {namespce: x}\n", "11:16: runtime.kubernetes: unknown key \"namespce\""},
		{"docker replicas 1", "docker: {replicas: 1}\n", ""},
		{"docker replicas", "docker: {replicas: 3}\n", "9:20: docker.replicas: 3 replicas: a Docker engine is served by one gateway per engine and scope"},
		{"docker replicas hint", "docker:\n  replicas: 2\n", "10:13: docker.replicas: 2 replicas: a Docker engine is served by one gateway per engine and scope (another one on the same data_dir waits as a standby); more replicas need the Kubernetes runtime (docs/kubernetes.md)"},
		{"docker replicas negative", "docker: {replicas: -1}\n", "9:20: docker.replicas: invalid replicas -1 (want 1, or leave the key out)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("cfg.yaml", []byte(base+tc.yaml))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				if tc.name == "kubernetes" && (c.Runtime.Kind != RuntimeKubernetes || c.Runtime.Kubernetes.Labels()["app"] != "pg") {
					t.Errorf("got %+v", c.Runtime)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "cfg.yaml:"+tc.want) {
				t.Fatalf("got %v, want cfg.yaml:%s", err, tc.want)
			}
		})
	}
}
