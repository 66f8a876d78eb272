package docker

import (
	"context"
	"log/slog"
	"maps"
	"strconv"
	"testing"

	"github.com/docker/docker/api/types/volume"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// legacyVolume makes record version n of id as versions before the bbolt
// store kept it: a volume labelled with the scope, the id, n and data.
func legacyVolume(t *testing.T, labels map[string]string, id string, n int, data string) {
	t.Helper()
	cli := dockertest.Client(t)
	l := runtime.Scoped(labels)
	maps.Copy(l, map[string]string{records.LabelRecord: id, legacyVersion: strconv.Itoa(n), legacyData: data})
	v, err := cli.VolumeCreate(context.Background(), volume.CreateOptions{Name: records.Name(id) + "-" + dockertest.RunID() + "-" + strconv.Itoa(n), Labels: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.VolumeRemove(context.Background(), v.Name, true) })
}

// TestOwnImportsVolumeRecords: a gateway upgraded from the volume register
// keeps its sandboxes' settings and share links: the first Own on a data
// dir imports each sandbox's newest record volume of its scope (and no
// other scope's), once; a record deleted afterwards is not brought back.
func TestOwnImportsVolumeRecords(t *testing.T) {
	labels, other := dockertest.ScopedLabels(), dockertest.ScopedLabels()
	legacyVolume(t, labels, "a", 1, `{"public":false}`)
	legacyVolume(t, labels, "a", 2, `{"public":true,"links":[{"id":"l1","digest":"d","path":"/","created":"2026-11-01T00:00:00Z","expires":"2099-01-01T00:00:00Z"}]}`)
	legacyVolume(t, labels, "b", 1, `{"keep_up_until":"2099-01-01T00:00:00Z"}`)
	legacyVolume(t, other, "c", 1, `{"public":true}`)
	dir := t.TempDir()
	own := func() *Ownership {
		w, err := Own(t.Context(), OwnOptions{DataDir: dir, Labels: labels}, slog.New(slog.NewTextHandler(t.Output(), nil)))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := own()
	recs := records.New(w.Records, records.Options{Labels: runtime.Scoped(labels)})
	a, err := recs.Load(t.Context(), "a")
	if err != nil || a.Public == nil || !*a.Public || len(a.Links) != 1 || a.Links[0].ID != "l1" {
		t.Fatalf("a after import: %+v %v; want version 2 (public, link l1)", a, err)
	}
	if b, err := recs.Load(t.Context(), "b"); err != nil || b.KeepUpUntil.IsZero() {
		t.Errorf("b after import: %+v %v; want its keep-up time", b, err)
	}
	all, err := w.Records.ListRecords(t.Context(), nil)
	if err != nil || len(all) != 2 {
		t.Errorf("records after import: %v %v; want a and b only (c is another scope's)", all, err)
	}
	if err := w.Records.DeleteRecord(t.Context(), "a", "", runtime.Scoped(labels)); err != nil {
		t.Fatal(err)
	}
	w.Close()

	w = own()
	defer w.Close()
	if all, err := w.Records.ListRecords(t.Context(), nil); err != nil || len(all) != 1 {
		t.Errorf("records after a restart: %v %v; want b only (the import runs once)", all, err)
	}
}
