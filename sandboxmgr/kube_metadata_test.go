package sandboxmgr_test

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// On the real kube-apiserver (#23): metadata set at create is pod labels,
// listed with the sandbox and found by a filter, also by a second manager
// that rebuilt everything from the API server (a restart, a replica);
// Pause answers ErrNoPause (Kubernetes has no pause: stop instead) and
// leaves the pod running; Resume never creates a sandbox whose pod a stop
// deleted.
func TestKubernetesMetadataAndPause(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	cfg := e.config()
	m := e.manager(t, cfg)
	tpl := testTemplate(t, nil)
	a, b := newID(), newID()
	for id, md := range map[string]map[string]string{a: {"user": "alice", "team": "x"}, b: {"user": "bob"}} {
		if _, err := m.EnsureWith(t.Context(), id, tpl, sandboxmgr.Options{Metadata: md}); err != nil {
			t.Fatalf("EnsureWith %s: %v", id, err)
		}
	}
	pod, err := e.cs.CoreV1().Pods(e.ns).Get(t.Context(), e.name(a), metav1.GetOptions{})
	if err != nil || pod.Labels[runtime.LabelMetaPrefix+"user"] != "alice" {
		t.Fatalf("pod of %s: labels %v, %v; want the metadata as labels", a, pod.Labels, err)
	}
	for name, mgr := range map[string]*mgrtest.Manager{"first": m, "second": e.manager(t, cfg)} {
		list, err := mgr.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var alice []string
		for _, s := range list {
			if sandboxmgr.MatchMetadata(s.Metadata, map[string]string{"user": "alice", "team": "x"}) {
				alice = append(alice, s.ID)
			}
		}
		if len(alice) != 1 || alice[0] != a {
			t.Errorf("%s manager: user=alice,team=x matched %v, want [%s]", name, alice, a)
		}
	}
	if err := m.Pause(t.Context(), a); !errors.Is(err, sandboxmgr.ErrNoPause) {
		t.Errorf("Pause: got %v, want ErrNoPause", err)
	}
	if n := len(e.pods(t, a)); n != 1 {
		t.Errorf("after a refused pause: %d pods, want the one running", n)
	}
	if _, err := m.Resume(t.Context(), a); err != nil {
		t.Errorf("Resume of a running sandbox: %v", err)
	}
	// Without a workspace a stop deletes the pod: nothing is left to
	// resume, and Resume never creates.
	if err := m.Stop(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	e.waitNoPod(t, b, 20*time.Second)
	if _, err := m.Resume(t.Context(), b); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Resume of a stopped sandbox without workspace: got %v, want ErrNoContainer", err)
	}
}
