package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// Runtime chooses where sandboxes run (#15): Docker, or Kubernetes as
// Kubernetes configures it (docs/kubernetes.md has an example).
type Runtime struct {
	Kind       string     `yaml:"kind,omitempty"` // Zero means docker.
	Kubernetes Kubernetes `yaml:"kubernetes,omitempty"`
}

// Runtime kinds.
const (
	RuntimeDocker     = "docker"
	RuntimeKubernetes = "kubernetes"
)

// Kubernetes configures the Kubernetes runtime.
type Kubernetes struct {
	Namespace  string `yaml:"namespace,omitempty"`  // Zero means the gateway's own (in cluster), else previewgate-sandboxes.
	Kubeconfig string `yaml:"kubeconfig,omitempty"` // Zero means $KUBECONFIG or ~/.kube/config, unless in_cluster.
	InCluster  bool   `yaml:"in_cluster,omitempty"`
	// GatewayLabels ("key=value") select the gateway's pods, which alone may
	// reach sandboxes. Zero means app.kubernetes.io/name=previewgate.
	GatewayLabels    []string `yaml:"gateway_labels,omitempty"`
	GatewayNamespace string   `yaml:"gateway_namespace,omitempty"` // Zero means namespace.
	RunAsUser        int64    `yaml:"run_as_user,omitempty"`       // Zero means 1000; -1 means the image's user.
	ActivityEvery    Duration `yaml:"activity_every,omitempty"`    // Zero means 10s; a template's idle_timeout/4 if shorter.
	// GatewayCIDRs may also reach sandboxes: a gateway outside the cluster.
	GatewayCIDRs []string `yaml:"gateway_cidrs,omitempty"`
	// Egress is what sandboxes may reach: internet (zero: DNS and public
	// addresses, no private, link-local or metadata range), none (DNS
	// only) or open (the cluster's own policy); EgressAllow adds CIDRs.
	Egress      string   `yaml:"egress,omitempty"`
	EgressAllow []string `yaml:"egress_allow,omitempty"`
}

// Labels returns GatewayLabels as a map (validated: every entry has "=").
func (k Kubernetes) Labels() map[string]string {
	if len(k.GatewayLabels) == 0 {
		return nil
	}
	m := make(map[string]string, len(k.GatewayLabels))
	for _, kv := range k.GatewayLabels {
		key, v, _ := strings.Cut(kv, "=")
		m[key] = v
	}
	return m
}

func (d *decoder) validateRuntime(c *Config) {
	r := &c.Runtime
	switch r.Kind {
	case "", RuntimeDocker:
		return
	case RuntimeKubernetes:
	default:
		d.fail(fmt.Sprintf("invalid runtime kind %q (want docker or kubernetes)", r.Kind), "runtime.kind", "runtime")
		return
	}
	k := &r.Kubernetes
	if k.InCluster && k.Kubeconfig != "" {
		d.fail("set in_cluster or kubeconfig, not both", "runtime.kubernetes.kubeconfig", "runtime.kubernetes")
	}
	for _, f := range []struct{ key, ns string }{{"namespace", k.Namespace}, {"gateway_namespace", k.GatewayNamespace}} {
		if key, ns := f.key, f.ns; ns != "" && !dnsLabel(ns) {
			d.fail(fmt.Sprintf("invalid namespace %q (a DNS label: lowercase letters, digits, inner hyphens)", ns), "runtime.kubernetes."+key, "runtime.kubernetes")
		}
	}
	for i := range k.GatewayLabels {
		if key, v, ok := strings.Cut(k.GatewayLabels[i], "="); !ok || key == "" || len(v) > 63 {
			d.fail(fmt.Sprintf("invalid gateway label %q (want key=value)", k.GatewayLabels[i]), fmt.Sprintf("runtime.kubernetes.gateway_labels[%d]", i), "runtime.kubernetes.gateway_labels", "runtime.kubernetes")
		}
	}
	switch k.Egress {
	case "", "internet", "none", "open":
	default:
		d.fail(fmt.Sprintf("invalid egress %q (want internet, none or open)", k.Egress), "runtime.kubernetes.egress", "runtime.kubernetes")
	}
	for _, f := range []struct {
		key  string
		list []string
	}{{"gateway_cidrs", k.GatewayCIDRs}, {"egress_allow", k.EgressAllow}} {
		for i, cidr := range f.list {
			if _, err := netip.ParsePrefix(cidr); err != nil {
				d.fail(fmt.Sprintf("invalid CIDR %q (e.g. 10.0.0.0/8)", cidr), fmt.Sprintf("runtime.kubernetes.%s[%d]", f.key, i), "runtime.kubernetes."+f.key, "runtime.kubernetes")
			}
		}
	}
	if k.RunAsUser < -1 {
		d.fail("run_as_user must be a uid, 0 for the default (1000) or -1 for the image's own", "runtime.kubernetes.run_as_user", "runtime.kubernetes")
	}
	// Pod names are previewgate-pool-<template>-<random>: template names
	// must fit a DNS label.
	for name := range c.Templates {
		if !dnsLabel(name) || len(name) > 30 {
			d.failKey(fmt.Sprintf("template name %q must be a lowercase DNS label of at most 30 characters with the kubernetes runtime", name), "templates."+name)
		}
	}
}
