package sandboxmgr_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// workspaceTemplate is testTemplate with a workspace at /workspace, where
// the test app's /file endpoint keeps its files.
func workspaceTemplate(t *testing.T) *config.Template {
	tpl := testTemplate(t, map[string]string{"FILES_DIR": "/workspace"})
	tpl.Workspace = &config.Workspace{Size: 64 << 20, Path: "/workspace"}
	return tpl
}

// claim returns sandbox id's workspace claim; nil if there is none or it
// is being deleted.
func (e *kubeEnv) claim(t *testing.T, id string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(context.Background(), e.name(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if pvc.DeletionTimestamp != nil {
		return nil
	}
	return pvc
}

// backdateStop moves the stop recorded on id's claim, and its last
// recorded activity, ago into the past.
func (e *kubeEnv) backdateStop(t *testing.T, id string, ago time.Duration) {
	t.Helper()
	pvc := e.claim(t, id)
	if pvc == nil || pvc.Annotations["previewgate.stopped-at"] == "" {
		t.Fatalf("got claim %v, want one with previewgate.stopped-at", pvc)
	}
	pvc.Annotations["previewgate.stopped-at"] = time.Now().Add(-ago).UTC().Format(time.RFC3339Nano)
	if _, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Update(context.Background(), pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("backdating the stop: %v", err)
	}
	// The last request before the stop counts too (the Lease's renewTime,
	// if the Lease is still there): it goes back with the stop.
	lease, err := e.cs.CoordinationV1().Leases(e.ns).Get(context.Background(), e.name(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatalf("reading the activity lease: %v", err)
	}
	back := metav1.NewMicroTime(time.Now().Add(-ago))
	lease.Spec.RenewTime, lease.Spec.AcquireTime = &back, &back
	if _, err := e.cs.CoordinationV1().Leases(e.ns).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("backdating the activity lease: %v", err)
	}
}

func (e *kubeEnv) waitNoClaim(t *testing.T, id string, within time.Duration) {
	t.Helper()
	waitWithin(t, within, "claim of "+id+" deleted", func() bool { return e.claim(t, id) == nil })
}

func waitWithin(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// putFile stores content as name in the sandbox's workspace.
func putFile(t *testing.T, ep sandboxmgr.Endpoint, name, content string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, "http://"+ep.Addr+"/file?name="+name, strings.NewReader(content))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("PUT %s: got %s %s, want 204", name, resp.Status, b)
	}
}

// fileIn returns name's content in the sandbox's workspace; "" if absent.
func fileIn(t *testing.T, ep sandboxmgr.Endpoint, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + ep.Addr + "/file?name=" + name)
	if err != nil {
		t.Fatalf("GET %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return string(b)
	case http.StatusNotFound:
		return ""
	}
	t.Fatalf("GET %s: got %s %s", name, resp.Status, b)
	return ""
}

// A template's workspace outlives its pods: an idle stop deletes the pod
// and keeps the claim (annotated with the stop), the next request makes a
// new pod on it and finds the file written before; remove_after removes
// the claim (the same manager, and a restarted one counting from the
// recorded stop), after which the sandbox starts empty; admin Stop keeps
// it and admin Remove deletes it. The agent backs claims with Docker
// volumes, so the file really lives on the volume.
func TestKubernetesWorkspaceKeptAcrossStops(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	tpl := workspaceTemplate(t)
	tpl.IdleTimeout = config.Duration(2 * time.Second)
	tpl.RemoveAfter = config.Duration(time.Hour)
	var cur atomic.Pointer[config.Template]
	cur.Store(tpl)
	setRemoveAfter := func(d time.Duration) *config.Template {
		c := *cur.Load()
		c.RemoveAfter = config.Duration(d)
		cur.Store(&c)
		return &c
	}
	cfg := e.config()
	cfg.ReapEvery = 200 * time.Millisecond
	cfg.Templates = func(string) *config.Template { return cur.Load() }
	m := e.manager(t, cfg)
	id := newID()

	// A new sandbox: pod and claim, the file written on the volume.
	ep, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	checkWorkspacePod(t, e, id)
	putFile(t, ep, "notes.txt", "kept across stops")
	pvc := e.claim(t, id)
	if pvc == nil {
		t.Fatal("no workspace claim")
	}
	for k, want := range map[string]string{runtime.LabelManaged: "true", runtime.LabelSandbox: id, runtime.LabelTemplate: "testapp", dockertest.LabelRun: dockertest.RunID()} {
		if got := pvc.Labels[k]; got != want {
			t.Errorf("claim label %s: got %q, want %q", k, got, want)
		}
	}
	if got := pvc.Spec.Resources.Requests.Storage().Value(); got != 64<<20 {
		t.Errorf("got storage request %d, want 64Mi", got)
	}
	t.Logf("claim finalizers: %v (the agent stands in for the pvc-protection controller)", pvc.Finalizers)

	// Idle stop: the pod goes, the claim stays, marked stopped.
	e.waitNoPod(t, id, 20*time.Second)
	pvc = e.claim(t, id)
	if pvc == nil || pvc.Annotations["previewgate.stopped-at"] == "" {
		t.Fatalf("after the idle stop got claim %v, want it kept with previewgate.stopped-at", pvc)
	}
	wantListed(t, m, id, "exited")
	ep2, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure after the idle stop: %v", err)
	}
	if ep2.Instance == ep.Instance {
		t.Errorf("got the same instance %s after a stop, want a new pod", ep2.Instance)
	}
	if got := fileIn(t, ep2, "notes.txt"); got != "kept across stops" {
		t.Fatalf("after the idle stop got file %q, want it kept", got)
	}
	if pvc := e.claim(t, id); pvc == nil || pvc.Annotations["previewgate.stopped-at"] != "" {
		t.Errorf("a pod runs on the claim: got %v, want no previewgate.stopped-at", pvc)
	}

	// remove_after on the manager that stopped it: claim and volume go.
	removeAfter := 4 * time.Second
	setRemoveAfter(removeAfter)
	e.waitNoPod(t, id, 20*time.Second)
	t0 := time.Now()
	e.waitNoClaim(t, id, removeAfter+20*time.Second)
	t.Logf("workspace removed %v after the idle stop (remove_after %v)", time.Since(t0).Round(100*time.Millisecond), removeAfter)
	waitWithin(t, 20*time.Second, "the Docker volume removed", func() bool { return e.agent.Volumes() == 0 })

	// The next create starts empty; admin Stop keeps the workspace too.
	tpl = setRemoveAfter(time.Hour)
	ep3, err := m.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure after the remove: %v", err)
	}
	if got := fileIn(t, ep3, "notes.txt"); got != "" {
		t.Fatalf("after the remove got file %q, want an empty workspace", got)
	}
	putFile(t, ep3, "notes.txt", "second life")
	if err := m.Stop(t.Context(), id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	e.waitNoPod(t, id, 20*time.Second)
	if e.claim(t, id) == nil {
		t.Fatal("admin Stop deleted the workspace")
	}

	// A restarted gateway sees the stopped sandbox (no pod, a claim) and
	// counts remove_after from the recorded stop, not from its own start:
	// the stop is moved an hour back, so with remove_after 10m the claim
	// is overdue at once; counted from the start it would stay 10 minutes,
	// far past the wait (no wall-clock bound on the removal itself).
	m.Close()
	// A pod still terminating would be listed by the new manager as the
	// sandbox's, removing, not exited: wait until it is gone
	// (TestKubernetesRestartWhileStoppedPodTerminates starts one meanwhile).
	waitWithin(t, 20*time.Second, "the stopped pod of "+id+" gone", func() bool {
		list, err := e.cs.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: runtime.LabelSandbox + "=" + id})
		return err == nil && len(list.Items) == 0
	})
	e.backdateStop(t, id, time.Hour)
	tpl = setRemoveAfter(10 * time.Minute)
	started := time.Now()
	m2 := e.manager(t, cfg)
	wantListed(t, m2, id, "exited")
	e.waitNoClaim(t, id, 20*time.Second)
	t.Logf("restarted gateway removed the workspace %v after its start (stopped an hour before, remove_after 10m)",
		time.Since(started).Round(100*time.Millisecond))

	// Admin Remove of a running sandbox deletes pod and workspace.
	tpl = setRemoveAfter(time.Hour)
	ep4, err := m2.Ensure(t.Context(), id, tpl)
	if err != nil {
		t.Fatalf("Ensure on the restarted gateway: %v", err)
	}
	if got := fileIn(t, ep4, "notes.txt"); got != "" {
		t.Errorf("got file %q in a new workspace, want none", got)
	}
	if err := m2.Remove(t.Context(), id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	e.waitNoPod(t, id, 20*time.Second)
	e.waitNoClaim(t, id, 20*time.Second)
	waitWithin(t, 20*time.Second, "every Docker volume removed", func() bool { return e.agent.Volumes() == 0 })
}

// checkWorkspacePod: the pod mounts the claim named like it at the
// workspace path, and its user's group owns the volume (fsGroup).
func checkWorkspacePod(t *testing.T, e *kubeEnv, id string) {
	t.Helper()
	pod, err := e.cs.CoreV1().Pods(e.ns).Get(t.Context(), e.name(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var claim string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	mounted := false
	for _, vm := range pod.Spec.Containers[0].VolumeMounts {
		mounted = mounted || vm.MountPath == "/workspace"
	}
	sc := pod.Spec.SecurityContext
	switch {
	case claim != pod.Name:
		t.Errorf("got claim %q, want %q", claim, pod.Name)
	case !mounted:
		t.Errorf("got mounts %+v, want /workspace", pod.Spec.Containers[0].VolumeMounts)
	case sc == nil || sc.FSGroup == nil || *sc.FSGroup != 1000:
		t.Errorf("got pod security context %+v, want fsGroup 1000", sc)
	}
}

// wantListed waits (briefly: a pod being deleted lists as removing) until
// m lists sandbox id in state.
func wantListed(t *testing.T, m *mgrtest.Manager, id, state string) {
	t.Helper()
	var got []sandboxmgr.Info
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := m.List(t.Context())
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		got = list
		for _, s := range list {
			if s.ID == id && s.State == state {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("got sandboxes %+v, want %s %s", got, id, state)
}
