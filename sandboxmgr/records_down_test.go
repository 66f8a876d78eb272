package sandboxmgr_test

import (
	"testing"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
)

// While the records fail (the store's disk broke, the engine answering),
// what needs no record goes on working as it did before removal marks
// existed (tombstone.go); what needs one fails.
// recordsDownEnv is a manager whose records can be made to fail, and
// sandbox id made through it, stopped.
func recordsDownEnv(t *testing.T) (*env, *dockertest.FailingRecords, *mgrtest.Manager, *config.Template, string) {
	e := newEnv(t)
	tpl := testTemplate(t, nil)
	e.cfg.Templates = func(string) *config.Template { return tpl }
	recs := &dockertest.FailingRecords{Store: e.rt.Records}
	e.rt.Records = recs
	removeScoped(t, e, e.cfg.Labels) // registered first: runs after the manager closes
	m := e.manager(t)
	id := newID()
	if _, err := m.Ensure(t.Context(), id, tpl); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	return e, recs, m, tpl, id
}

// TestDockerWakeWhileRecordsFail: a wake that starts the stopped
// container makes none, so it needs no removal mark (a DELETE's lookup
// finds what it started): it works while records fail. It used to fail
// reading the record first. A create still fails: without the record it
// could not tell a DELETE on another replica.
func TestDockerWakeWhileRecordsFail(t *testing.T) {
	t.Parallel()
	_, recs, m, tpl, id := recordsDownEnv(t)
	recs.Fail(true)
	if _, err := m.Ensure(t.Context(), id, tpl); err != nil {
		t.Errorf("wake of a stopped sandbox while records fail: %v, want it running", err)
	}
	if _, err := m.Ensure(t.Context(), newID(), tpl); err == nil {
		t.Error("create of a new sandbox while records fail: got nil, want an error")
	}
}

// TestDockerRemoveWhileRecordsFail: a DELETE removes the container it
// finds while records fail (its removal mark cannot be written, which the
// log says). It used to fail on the mark and leave the sandbox running:
// no sandbox could be removed through the API while, say, the disk
// holding the records was full.
func TestDockerRemoveWhileRecordsFail(t *testing.T) {
	t.Parallel()
	e, recs, m, _, id := recordsDownEnv(t)
	recs.Fail(true)
	if err := m.Remove(t.Context(), id); err != nil {
		t.Errorf("DELETE while records fail: %v, want nil", err)
	}
	if n := len(e.containers(t, id)); n != 0 {
		t.Errorf("after the DELETE: %d containers of %s, want none", n, id)
	}
}
