package docker

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// lostErr records what a lock's Lost was called with.
type lostErr struct {
	mu  sync.Mutex
	err error
}

func (l *lostErr) set(err error) { l.mu.Lock(); defer l.mu.Unlock(); l.err = err }
func (l *lostErr) get() error    { l.mu.Lock(); defer l.mu.Unlock(); return l.err }

// takeLock runs lockScope for owner with a client of its own; a lock it
// returns is closed when t ends (unless crash stopped it before).
func takeLock(t *testing.T, labels map[string]string, owner string, lost func(error)) (*scopeLock, error) {
	t.Helper()
	cli, err := newDockerClient("", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	l, err := lockScope(t.Context(), cli, labels, owner, lost, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err == nil {
		t.Cleanup(l.close)
	}
	return l, err
}

// crash stops l as a killed gateway stops: its lock stays.
func crash(l *scopeLock) {
	l.cancel()
	<-l.done
	l.held.Store(false)
}

func lockNonce(t *testing.T, l *scopeLock) string {
	t.Helper()
	v, err := l.cli.VolumeInspect(context.Background(), l.name)
	if cerrdefs.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v.Labels[labelLockNonce]
}

// TestScopeLockRefusesLiveHolder: a second gateway of the scope on another
// data dir is refused, saying why and pointing to Kubernetes, within a
// moment; the holder keeps the lock and removes it on a clean exit, and no
// ping is left behind.
func TestScopeLockRefusesLiveHolder(t *testing.T) {
	dockertest.Client(t)
	labels := dockertest.ScopedLabels()
	a, err := takeLock(t, labels, "owner-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = takeLock(t, labels, "owner-b", nil)
	took := time.Since(t0)
	if !errors.Is(err, ErrScopeTaken) {
		t.Fatalf("second live gateway: got %v, want ErrScopeTaken", err)
	}
	for _, want := range []string{"owner-a", "one gateway per scope", "docs/kubernetes.md", "standby", "answered a ping"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	t.Logf("second live gateway refused after %v", took.Round(time.Millisecond))
	if took > 2*lockPoll {
		t.Errorf("refused after %v, want within %v (the holder answers from its events)", took, 2*lockPoll)
	}
	if got := lockNonce(t, a); got != a.nonce {
		t.Errorf("lock after the refusal carries nonce %q, want the holder's %q", got, a.nonce)
	}
	pings, err := a.cli.VolumeList(t.Context(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labelPing+"="+a.pingLabels[labelPing]))})
	if err != nil || len(pings.Volumes) != 0 {
		t.Errorf("pings left: %d %v, want none", len(pings.Volumes), err)
	}
	a.close()
	if got := lockNonce(t, a); got != "" {
		t.Errorf("lock after a clean exit: still there (nonce %q), want it removed", got)
	}
}

// TestScopeLockTakeover: the lock of a gateway that is gone is taken:
// at once by a gateway of its own data dir, after an unanswered ping by
// another, at once by another when the holder's process is gone on this
// machine.
func TestScopeLockTakeover(t *testing.T) {
	dockertest.Client(t)
	defer func(d time.Duration) { pingWait = d }(pingWait)
	pingWait = time.Second

	labels := dockertest.ScopedLabels()
	a, err := takeLock(t, labels, "owner-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	crash(a)
	t0 := time.Now()
	a2, err := takeLock(t, labels, "owner-a", nil)
	if err != nil {
		t.Fatalf("a restarted gateway of the same data dir: %v", err)
	}
	if took := time.Since(t0); took > pingWait {
		t.Errorf("same data dir took the lock after %v, want at once (no ping)", took)
	}
	if got := lockNonce(t, a2); got != a2.nonce {
		t.Errorf("lock carries nonce %q, want the new gateway's %q", got, a2.nonce)
	}

	crash(a2)
	t0 = time.Now()
	b, err := takeLock(t, labels, "owner-b", nil)
	if err != nil {
		t.Fatalf("another data dir, the holder gone: %v", err)
	}
	if took := time.Since(t0); took < pingWait || took > pingWait+5*time.Second {
		t.Errorf("another data dir took a dead holder's lock after %v, want after its ping went unanswered (%v)", took, pingWait)
	}

	// A holder whose process is gone on this machine: no ping needed.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	crash(b)
	dead := maps.Clone(b.labels)
	dead[labelLockPID] = strconv.Itoa(cmd.Process.Pid)
	dead[labelLockNonce] = "dead"
	if err := b.cli.VolumeRemove(t.Context(), b.name, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.VolumeCreate(t.Context(), volume.CreateOptions{Name: b.name, Labels: dead}); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if _, err := takeLock(t, labels, "owner-c", nil); err != nil {
		t.Fatalf("the holder's process gone: %v", err)
	}
	if took := time.Since(t0); took > pingWait {
		t.Errorf("took a lock whose holder's process is gone after %v, want at once", took)
	}
}

// TestScopeLockLost: a holder whose lock another gateway took over (it
// did not answer in time) learns it within a few lockPolls and is told
// to exit; it then leaves the other's lock alone on close.
func TestScopeLockLost(t *testing.T) {
	dockertest.Client(t)
	labels := dockertest.ScopedLabels()
	var lost lostErr
	a, err := takeLock(t, labels, "owner-a", lost.set)
	if err != nil {
		t.Fatal(err)
	}
	other := maps.Clone(a.labels)
	other[labelLockOwner], other[labelLockNonce] = "owner-b", "theirs"
	// The holder makes a removed lock again at once: take it in the gap.
	for taken := false; !taken; {
		if err := a.cli.VolumeRemove(t.Context(), a.name, true); err != nil {
			t.Fatal(err)
		}
		v, err := a.cli.VolumeCreate(t.Context(), volume.CreateOptions{Name: a.name, Labels: other})
		if err != nil {
			t.Fatal(err)
		}
		taken = v.Labels[labelLockNonce] == "theirs"
	}
	for end := time.Now().Add(5 * lockPoll); lost.get() == nil && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	if err := lost.get(); !errors.Is(err, ErrScopeTaken) || !strings.Contains(err.Error(), "owner-b") {
		t.Fatalf("Lost: got %v, want ErrScopeTaken naming owner-b", err)
	}
	a.close()
	if got := lockNonce(t, a); got != "theirs" {
		t.Errorf("after the old holder's close the lock carries %q, want the new holder's kept", got)
	}
}

// TestScopeLockEngineAway: an engine that cannot be reached at start does
// not stop the gateway (it serves 503s until the engine is back).
func TestScopeLockEngineAway(t *testing.T) {
	cli, err := newDockerClient("tcp://127.0.0.1:1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l, err := lockScope(t.Context(), cli, map[string]string{"previewgate.test": "1"}, "owner", nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("engine away at start: %v, want to go on", err)
	}
	l.close()
}
