package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Watch runs an informer on the scoped pods and reports their changes as
// runtime Events (#15). The informer relists by itself after a broken
// watch, so since is not needed. It returns when ctx ends; fn is called
// from the informer's one handler goroutine, in order.
func (e *Runtime) Watch(ctx context.Context, _ time.Time, lbls map[string]string, fn func(runtime.Event)) error {
	sel := labels.SelectorFromSet(lbls).String()
	f := informers.NewSharedInformerFactoryWithOptions(e.watch, 0, informers.WithNamespace(e.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	inf := f.Core().V1().Pods().Informer()
	// managedFields are a third of a cached pod; nothing reads them.
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	emit := func(action string, pod *corev1.Pod) {
		fn(runtime.Event{Action: action, ID: kubeID(pod), Name: logicalName(pod), Pool: pod.Labels[runtime.LabelPool], Labels: pod.Labels, Time: time.Now()})
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && podInfo(pod).State == runtime.StateRunning {
				emit(runtime.EventStart, pod)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Pod)
			pod, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 {
				return
			}
			for _, ev := range podEvents(old, pod) {
				ev.ID, ev.Pool, ev.Labels, ev.Time = kubeID(pod), pod.Labels[runtime.LabelPool], pod.Labels, time.Now()
				fn(ev)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				action := runtime.EventDestroy
				if workspaceClaim(pod) != "" {
					action = runtime.EventKept // the sandbox is stopped, not gone
				}
				emit(action, pod)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	// Until the informer relists, a pod that ended unseen may have passed
	// its address on (#21).
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		fn(runtime.Event{Action: runtime.EventWatchBroken, Time: time.Now()})
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	// The lease sweep lives as long as the watch; Watch waits for both.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { e.sweepLoop(ctx, lbls, e.kc.Log) })
	inf.Run(ctx.Done())
	return ctx.Err()
}

func stripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// podEvents translates one pod update into container events.
func podEvents(old, pod *corev1.Pod) []runtime.Event {
	var out []runtime.Event
	if old.Labels[LabelClaimed] == "" && pod.Labels[LabelClaimed] != "" {
		out = append(out, runtime.Event{Action: runtime.EventRename, OldName: old.Name, Name: logicalName(pod)})
	}
	if old.Labels[LabelClaimed] != "" && pod.Labels[LabelClaimed] == "" && podInfo(pod).State == runtime.StateRunning {
		// A claim undone (it lost the Lease): back in the pool.
		out = append(out, runtime.Event{Action: runtime.EventStart, Name: pod.Name})
	}
	name := logicalName(pod)
	was, now := podInfo(old), podInfo(pod)
	switch {
	case now.State == was.State && now.State == runtime.StateRunning && !now.StartedAt.Equal(was.StartedAt):
		out = append(out, runtime.Event{Action: runtime.EventDie, Name: name}, runtime.Event{Action: runtime.EventStart, Name: name})
	case now.State == was.State:
	case now.State == runtime.StateRemoving:
		out = append(out, runtime.Event{Action: runtime.EventKill, Name: name})
	case now.State == runtime.StateRunning:
		out = append(out, runtime.Event{Action: runtime.EventStart, Name: name})
	case was.State == runtime.StateRunning:
		out = append(out, runtime.Event{Action: runtime.EventDie, Name: name})
	}
	return out
}
