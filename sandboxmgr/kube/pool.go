package kube

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The warm pool: a claim takes the sandbox's Lease first (of two replicas
// claiming for one id, the loser touches no pod), then binds the pod with
// a label update guarded by its resourceVersion (of two claiming one pod,
// one gets a conflict and gives its Lease back).

// Claim binds pool pod container to the sandbox named name.
func (e *Runtime) Claim(ctx context.Context, container, name string) error {
	id, ok := runtime.SandboxOf(name)
	if !ok || !config.ValidID(id) {
		return fmt.Errorf("claim %s: not a sandbox name", name)
	}
	podName, _ := splitKubeID(container)
	if err := e.takeLease(ctx, name, id, podName); err != nil {
		return err
	}

	if err := e.bindPool(ctx, container, id, name); err != nil {
		if lerr := e.deleteLease(context.WithoutCancel(ctx), name, podName); lerr != nil {
			err = errors.Join(err, lerr)
		}
		return err
	}
	return nil
}

// bindPool labels pool pod container as sandbox id's (named name);
// runtime.ErrNotFound if it is gone or another replica claimed it.
func (e *Runtime) bindPool(ctx context.Context, container, id, name string) error {
	for attempt := 0; ; attempt++ {
		p, err := e.podByID(ctx, container)
		if err != nil {
			return err
		}
		if p.Labels[LabelClaimed] == id && p.DeletionTimestamp == nil {
			// Another replica claimed this very pod for the same sandbox.
			return nil
		}
		if p.Labels[LabelClaimed] != "" || p.DeletionTimestamp != nil {
			return fmt.Errorf("pool pod %s: %w (claimed by another replica)", p.Name, runtime.ErrNotFound)
		}
		p.Labels[LabelClaimed] = id
		p.Labels[runtime.LabelSandbox] = id
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[annName] = name
		// Guarded by the resourceVersion read above.
		_, err = e.cs.CoreV1().Pods(e.ns).Update(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 3 {
			return kclassify("claim pod "+p.Name, err, runtime.ErrNotFound)
		}
	}
}
