package gateway

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// TestDockerAnonymousCannotTellPrivateFromMissing (attack21): with a public
// default template, a request without a token must not tell an existing
// private sandbox from an id nobody made: both get the same status, code
// and message. Otherwise anyone can enumerate which private sandboxes
// exist (an existing private one answered "unauthorized", a missing one
// "no_sandbox").
func TestDockerAnonymousCannotTellPrivateFromMissing(t *testing.T) {
	t.Parallel()
	e := publicDefaultEnv(t)
	x := dockertest.UniqueID("priv")
	if _, err := e.mgr.Ensure(t.Context(), x, e.cfg.Templates["priv"]); err != nil {
		t.Fatal(err)
	}
	y := dockertest.UniqueID("none")
	c1, j1, b1 := e.anon(x, "/")
	c2, j2, b2 := e.anon(y, "/")
	if c1 != http.StatusUnauthorized || c2 != http.StatusUnauthorized {
		t.Fatalf("statuses %d (private) and %d (missing), want 401 both", c1, c2)
	}
	var m1, m2 struct{ Error string }
	json.Unmarshal(b1, &m1)
	json.Unmarshal(b2, &m2)
	if j1 != j2 || m1.Error != m2.Error {
		t.Errorf("an anonymous client tells an existing private sandbox from a missing one:\n private: %s %q\n missing: %s %q",
			j1, m1.Error, j2, m2.Error)
	}
	if n := len(e.containers(y)); n != 0 {
		t.Fatalf("anonymous request made %d containers, want 0", n)
	}
}
