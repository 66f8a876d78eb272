package sandboxmgr_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// callCounter counts API requests by verb and resource.
type callCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		verb := r.Method
		if r.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		res := parts[len(parts)-1]
		for i, p := range parts {
			if p == "namespaces" && i+2 < len(parts) {
				res = parts[i+2]
			}
		}
		c.mu.Lock()
		c.n[verb+" "+res]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (c *callCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	c.n = map[string]int{}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The runtime works with a ServiceAccount token bound by exactly the RBAC
// rules in deploy/kubernetes/rbac.yaml (namespaces renamed to the test's),
// and the test measures the API calls per new sandbox, per wake of a
// running one and per stop (docs/kubernetes.md).
func TestKubernetesRBACFromDeploy(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	gwNS := e.ns + "-gw"
	e.cluster.Namespace(t, gwNS)
	raw, err := os.ReadFile("../deploy/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var sa string
	var role rbacv1.Role
	roles := 0
	for {
		var obj struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		var doc rawDoc
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("rbac.yaml: %v", err)
		}
		if err := doc.into(&obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "ServiceAccount":
			sa = obj.Name
			if _, err := e.cs.CoreV1().ServiceAccounts(gwNS).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "Role":
			var r rbacv1.Role
			if err := doc.into(&r); err != nil {
				t.Fatal(err)
			}
			r.Namespace = e.ns
			if _, err := e.cs.RbacV1().Roles(e.ns).Create(t.Context(), &r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			role = r
			roles++
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := doc.into(&b); err != nil {
				t.Fatal(err)
			}
			b.Namespace = e.ns
			for i := range b.Subjects {
				b.Subjects[i].Namespace = gwNS
			}
			if _, err := e.cs.RbacV1().RoleBindings(e.ns).Create(t.Context(), &b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("rbac.yaml: unexpected kind %s", obj.Kind)
		}
	}
	if sa == "" || roles != 1 {
		t.Fatalf("rbac.yaml: got service account %q and %d roles, want one each", sa, roles)
	}
	exp := int64(3600)
	tr, err := e.cs.CoreV1().ServiceAccounts(gwNS).CreateToken(t.Context(), sa, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", sa, err)
	}
	calls := &callCounter{n: map[string]int{}}
	rc := rest.CopyConfig(e.cluster.Config(tr.Status.Token))
	waitRulesEffective(t, rc, e.ns, role)
	rc.WrapTransport = calls.wrap
	cfg := e.config()
	cfg.Kubernetes.REST = rc
	cfg.Kubernetes.GatewayNamespace = gwNS
	m := e.manager(t, cfg)
	time.Sleep(200 * time.Millisecond) // let the informer settle before counting
	startCalls := calls.take()

	tpl := testTemplate(t, nil)
	id := newID()
	ep, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure with the deploy RBAC: %v", err)
	}
	get(t, ep)
	create := calls.take()
	m.Sandbox(id).Forget(ep.Addr)
	if _, err := m.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatal(err)
	}
	rewake := calls.take()
	// Settings (#23): a ConfigMap written, read and (below, with the
	// sandbox) deleted under the deploy Role.
	yes := true
	if _, err := m.Records.Update(t.Context(), id, func(s *records.Settings) error { s.Public = &yes; return nil }); err != nil {
		t.Fatalf("UpdateSettings with the deploy RBAC: %v", err)
	}
	if s, err := m.Records.Load(t.Context(), id); err != nil || s.Public == nil {
		t.Fatalf("LoadSettings with the deploy RBAC: %v %v", s, err)
	}
	settings := calls.take()
	if err := m.Stop(t.Context(), id); err != nil {
		t.Fatalf("Stop with the deploy RBAC: %v", err)
	}
	// Until the stopped pod is gone, Remove would find and delete it; after,
	// it finds none (ErrNotFound) and clears the record alone: wait for
	// that, so the remove row always counts the same calls.
	e.waitPodGone(t, id, 20*time.Second)
	stop := calls.take()
	if err := m.Remove(t.Context(), id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Remove with the deploy RBAC: %v", err)
	}
	// The settings go; a removal mark stays a while (tombstone.go).
	if cm, err := e.cs.CoreV1().ConfigMaps(e.ns).Get(t.Context(), records.Name(id), metav1.GetOptions{}); err != nil ||
		!strings.Contains(cm.Data["record"], `"removed"`) || strings.Contains(cm.Data["record"], `"public"`) {
		t.Errorf("the sandbox's record after Remove: %v %v, want only a removal mark", cm.Data, err)
	}
	remove := calls.take()
	rows := []callRow{{"manager start", startCalls}, {"new sandbox", create}, {"re-probe of a running sandbox", rewake},
		{"settings write and read", settings}, {"stop", stop}, {"remove", remove}}
	rows = append(rows, workspaceCalls(t, e, m, calls)...)
	for _, row := range rows {
		t.Logf("API calls, %s: %s", row.name, fmtCalls(row.n))
	}
}

// waitRulesEffective waits until the API server's authorizer grants the
// holder of rc every verb of role in ns. The RBAC authorizer reads Roles
// and RoleBindings from its own informer, so a binding created a moment
// ago can still be unknown to it (CI saw "forbidden" on the first call).
func waitRulesEffective(t *testing.T, rc *rest.Config, ns string, role rbacv1.Role) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range role.Rules {
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, verb := range rule.Verbs {
					resource, sub, _ := strings.Cut(res, "/") // pods/log: a subresource
					attr := &authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: sub}
					what := fmt.Sprintf("%s %s.%s granted by the deploy Role", verb, res, group)
					waitWithin(t, 10*time.Second, what, func() bool {
						r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(),
							&authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attr}},
							metav1.CreateOptions{})
						return err == nil && r.Status.Allowed
					})
				}
			}
		}
	}
}

type callRow struct {
	name string
	n    map[string]int
}

// workspaceCalls runs a sandbox with a workspace through m (bound by the
// deploy Role) and returns the API calls of each step: every claim verb
// the runtime uses (a replica start lists claims too).
func workspaceCalls(t *testing.T, e *kubeEnv, m *mgrtest.Manager, calls *callCounter) []callRow {
	t.Helper()
	tpl := workspaceTemplate(t)
	id := newID()
	ep, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure with a workspace and the deploy RBAC: %v", err)
	}
	putFile(t, ep, "f", "x")
	create := calls.take()
	if err := m.Stop(t.Context(), id); err != nil {
		t.Fatalf("Stop with a workspace and the deploy RBAC: %v", err)
	}
	e.waitNoPod(t, id, 20*time.Second)
	stop := calls.take()
	// Measure the wake from a pod that is gone, not one still terminating.
	waitWithin(t, 20*time.Second, "the stopped pod gone", func() bool {
		_, err := e.cs.CoreV1().Pods(e.ns).Get(t.Context(), e.name(id), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	ep, err = m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure of a kept workspace with the deploy RBAC: %v", err)
	}
	if got := fileIn(t, ep, "f"); got != "x" {
		t.Errorf("got file %q after the stop, want x", got)
	}
	wake := calls.take()
	if err := m.Remove(t.Context(), id); err != nil {
		t.Fatalf("Remove with a workspace and the deploy RBAC: %v", err)
	}
	e.waitNoPod(t, id, 20*time.Second)
	e.waitNoClaim(t, id, 20*time.Second)
	remove := calls.take()
	return []callRow{{"new sandbox with a workspace", create}, {"stop with a workspace", stop},
		{"wake of a kept workspace", wake}, {"remove with a workspace", remove}}
}

func fmtCalls(n map[string]int) string {
	keys := make([]string, 0, len(n))
	total := 0
	for k, v := range n {
		keys = append(keys, fmt.Sprintf("%s=%d", k, v))
		total += v
	}
	sort.Strings(keys)
	return fmt.Sprintf("%d (%s)", total, strings.Join(keys, ", "))
}

// rawDoc keeps one YAML document as JSON to decode into several types.
type rawDoc struct{ b []byte }

func (d *rawDoc) UnmarshalJSON(b []byte) error { d.b = append([]byte(nil), b...); return nil }

func (d *rawDoc) into(v any) error { return yaml.Unmarshal(d.b, v) }
