package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestSandboxesLogsFollowSaysRemoved: logs -f of a sandbox that rm
// removes ends (exit 0) saying it was removed, not stopped (the CLI
// walk: it said "stopped" whatever happened; the stream's end event does
// not tell, the API's list does).
func TestSandboxesLogsFollowSaysRemoved(t *testing.T) {
	id := dockertest.UniqueID("clirm")
	_, adminAddr := startCLIGateway(t, id)
	t.Setenv(adminEnv, "")
	t.Setenv(configEnv, "")
	flags := []string{"--admin", adminAddr, "--token", cliAPIToken}
	if code, _, errs := cli(append([]string{"sandboxes", "up", id}, flags...)...); code != 0 {
		t.Fatalf("up: exit %d %s", code, errs)
	}
	follow, followErr := &syncBuffer{}, &syncBuffer{}
	followed := make(chan int, 1)
	go func() {
		followed <- run(append([]string{"sandboxes", "logs", "-f", id, "--tail", "5"}, flags...), follow, followErr)
	}()
	testkit.WaitFor(t, "logs -f to print the listening line", func() bool {
		return strings.Contains(follow.String(), "testapp: listening on :3000")
	})
	if code, _, errs := cli(append([]string{"sandboxes", "rm", id}, flags...)...); code != 0 {
		t.Fatalf("rm: exit %d %s", code, errs)
	}
	select {
	case code := <-followed:
		if want := "sandbox " + id + " removed"; code != 0 || !strings.Contains(followErr.String(), want) {
			t.Errorf("logs -f after rm: exit %d %q, want 0 and %q", code, followErr.String(), want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs -f did not end when the sandbox was removed")
	}
}
