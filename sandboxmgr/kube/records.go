package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Records (records.Store): one ConfigMap per sandbox, records.Name(id),
// labelled with the scope and the id, its bytes under "record". Not on the
// Lease, which goes with the pod: settings and links outlive a stop.
// Writes are guarded by the resourceVersion (a stale writer gets
// ErrConflict); deploy/kubernetes/rbac.yaml grants configmaps.
const recordKey = "record"

// ListRecords returns every record carrying labels.
func (e *Runtime) ListRecords(ctx context.Context, labels map[string]string) (map[string]records.Record, error) {
	list, err := e.cs.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{
		LabelSelector: k8slabels.SelectorFromSet(labels).String() + "," + records.LabelRecord})
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("list records (per-sandbox settings): the gateway's Role lacks configmaps (deploy/kubernetes/rbac.yaml): %w", err)
	}
	if err != nil {
		return nil, kclassify("list records", err, nil)
	}
	out := make(map[string]records.Record, len(list.Items))
	for _, cm := range list.Items {
		id := cm.Labels[records.LabelRecord]
		if id == "" || cm.Name != records.Name(id) {
			continue
		}
		out[id] = records.Record{Data: []byte(cm.Data[recordKey]), Version: cm.ResourceVersion}
	}
	return out, nil
}

// PutRecord creates id's ConfigMap (prev "") or updates it at version prev.
func (e *Runtime) PutRecord(ctx context.Context, id, prev string, data []byte, labels map[string]string) (string, error) {
	if len(data) > records.MaxRecord {
		return "", fmt.Errorf("record %s: %w", id, records.ErrRecordSize)
	}
	l := withLabels(labels)
	l[records.LabelRecord] = id

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: records.Name(id), Labels: l, ResourceVersion: prev},
		Data:       map[string]string{recordKey: string(data)},
	}
	cms := e.cs.CoreV1().ConfigMaps(e.ns)
	var got *corev1.ConfigMap
	var err error
	if prev == "" {
		got, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		got, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	switch {
	case apierrors.IsAlreadyExists(err):
		// Another replica's create, or another scope's record, which no
		// retry gets past.
		if other, gerr := cms.Get(ctx, cm.Name, metav1.GetOptions{}); gerr == nil && !runtime.HasLabels(other.Labels, labels) {
			return "", fmt.Errorf("record %s: ConfigMap %s (scope %q): %w; remove it if that gateway no longer needs sandbox %s",
				id, cm.Name, other.Labels[runtime.LabelInstance], records.ErrForeignRecord, id)
		}
		return "", fmt.Errorf("record %s: %w", id, records.ErrConflict)
	case apierrors.IsConflict(err), prev != "" && apierrors.IsNotFound(err):
		return "", fmt.Errorf("record %s: %w", id, records.ErrConflict)
	case err != nil:
		return "", kclassify("write record "+cm.Name, err, nil)
	}
	return got.ResourceVersion, nil
}

// DeleteRecord removes id's ConfigMap if it carries labels and is still
// at version prev (any version if prev is "").
func (e *Runtime) DeleteRecord(ctx context.Context, id, prev string, labels map[string]string) error {
	cms := e.cs.CoreV1().ConfigMaps(e.ns)
	name := records.Name(id)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return kclassify("get record "+name, err, nil)
	}
	if !runtime.HasLabels(cm.Labels, labels) {
		return nil // another scope's: not ours to delete
	}
	pre := &metav1.Preconditions{UID: &cm.UID}
	if prev != "" {
		pre.ResourceVersion = &prev // the API server refuses it if a write came since
	}
	err = cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("record %s: %w", id, records.ErrConflict)
	}
	return kclassify("delete record "+name, err, nil)
}

var _ records.Store = (*Runtime)(nil)
