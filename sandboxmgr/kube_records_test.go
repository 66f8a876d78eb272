package sandboxmgr_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// TestKubernetesRecordOfAnotherScope: another gateway scope's record
// ConfigMap (its sandbox's pod removed by hand) holds the name of a
// sandbox's record. A write reported a conflict, which the manager retried
// and the admin API answered 503 "retry" to, for ever; it must say whose
// record is in the way, and leave it alone.
func TestKubernetesRecordOfAnotherScope(t *testing.T) {
	t.Parallel()
	e := newKubeEnv(t)
	theirs := maps.Clone(e.labels)
	theirs[runtime.LabelInstance] = "other-scope"
	ours := maps.Clone(e.labels)
	ours[runtime.LabelInstance] = "this-scope"
	other, err := kube.New(kube.Config{Namespace: e.ns, REST: e.rest}, theirs)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := kube.New(kube.Config{Namespace: e.ns, REST: e.rest}, ours)
	if err != nil {
		t.Fatal(err)
	}
	id := newID()
	if _, err := other.PutRecord(t.Context(), id, "", []byte("theirs"), theirs); err != nil {
		t.Fatal(err)
	}
	v, err := mine.PutRecord(t.Context(), id, "", []byte("ours"), ours)
	if !errors.Is(err, records.ErrForeignRecord) || !strings.Contains(err.Error(), records.Name(id)) || !strings.Contains(err.Error(), "other-scope") {
		t.Fatalf("got %q %v, want ErrForeignRecord naming the ConfigMap and its scope", v, err)
	}
	if list, err := other.ListRecords(t.Context(), theirs); err != nil || string(list[id].Data) != "theirs" {
		t.Errorf("their record: got %v %v, want it untouched", list, err)
	}
}
