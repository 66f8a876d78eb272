package kube

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Logs writes pod id's app output to w: the last tail lines, then
// (follow) new output until the pod stops or ctx ends. Without a kubelet
// that answers (the test control plane) it fails, and the waiting page
// shows phases without output.
func (e *Runtime) Logs(ctx context.Context, id string, tail int, follow bool, w io.Writer) error {
	name, _ := splitKubeID(id)
	n := int64(tail)
	opts := &corev1.PodLogOptions{Container: kubeContainer, TailLines: &n, Follow: follow}
	client := e.cs
	if follow {
		client = e.watch // a follow streams for minutes: no client timeout
	}
	rc, err := client.CoreV1().Pods(e.ns).GetLogs(name, opts).Stream(ctx)
	if err != nil {
		return kclassify("logs "+name, err, runtime.ErrNotFound)
	}
	defer rc.Close()
	var r io.Reader = rc
	if !follow {
		r = io.LimitReader(rc, 4<<20) // a tail is read whole: bound it
	}
	if _, err := io.Copy(w, r); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs %s: %w", name, err)
	}
	return nil
}
