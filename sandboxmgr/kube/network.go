package kube

import (
	"context"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
	"maps"

	netv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the cluster does instead of the Docker Engine: a NetworkPolicy for
// the bridge network's isolation, registries for local images.

// EnsureNetwork makes the sandboxes' NetworkPolicy: ingress to managed pods
// only from the gateway's pods, so sandboxes cannot reach each other (nor
// anything else in the cluster reach them). Egress is left to the cluster's
// own policy. It never updates an existing policy (an operator may have
// tightened it); the RBAC needs get and create only.
func (e *Runtime) Isolate(ctx context.Context, name string, lbls map[string]string) error {
	np := &netv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: maps.Clone(lbls)},
		Spec: netv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: maps.Clone(lbls)},
			PolicyTypes: []netv1.PolicyType{netv1.PolicyTypeIngress},
			Ingress: []netv1.NetworkPolicyIngressRule{{From: []netv1.NetworkPolicyPeer{{
				PodSelector:       &metav1.LabelSelector{MatchLabels: e.kc.GatewayLabels},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.kc.GatewayNamespace}},
			}}}},
		},
	}
	_, err := e.cs.NetworkingV1().NetworkPolicies(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return kclassify("get network policy "+name, err, nil)
	}
	_, err = e.cs.NetworkingV1().NetworkPolicies(e.ns).Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return kclassify("create network policy "+name, err, nil)
}

// Capabilities: no image store (the kubelet pulls; a missing image shows
// as a pod that never runs), no pause (a pod cannot be frozen), Leases as
// the shared activity, workspaces as PersistentVolumeClaims, and pod logs
// through the API server (which asks the node's kubelet).
func (e *Runtime) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Activity: e, Logs: e, Workspaces: true}
}

// Close releases nothing: client-go's clients hold no resources to close.
func (e *Runtime) Close() error { return nil }
