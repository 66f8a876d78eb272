package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The manager's scope (#13, #21). Every instance it creates carries
// previewgate.managed=true, its Config.Labels and runtime.LabelScope, a
// stamp of exactly those labels. It owns an instance only if it carries its
// stamp and every one of its labels. Instances older than the stamp have
// none; for them the older rule holds (every scope label), except that a
// gateway without labels leaves alone those that name an instance.
//
// One named previewgate-<id> that the manager does not own is never acted
// on or proxied to: Ensure fails with runtime.ErrForeign saying whose it is.
// The collision is reported, never "fixed" by removing it.
//
// Checking labels and then acting by name would race with the name being
// taken, so every call that changes an instance takes the ID of one whose
// labels were checked (labels are immutable) or that this manager created.

// scopeLabels selects the containers this manager may own: the runtime
// filters lists and events by them, and owns decides.
func (m *Manager) scopeLabels() map[string]string {
	l := make(map[string]string, len(m.cfg.Labels)+1)
	maps.Copy(l, m.cfg.Labels)
	l[runtime.LabelManaged] = "true"
	return l
}

// createLabels are the labels of every container this manager creates.
func (m *Manager) createLabels() map[string]string { return runtime.Scoped(m.cfg.Labels) }

// ForeignError is the runtime.ErrForeign a manager returns: the name is
// on a container it does not own. Scope is the owning gateway's scope
// (its previewgate.instance label), "" when it is not known by a name.
type ForeignError struct {
	Container string
	Scope     string
	Why       string // whose it is, for operators
	Managed   bool   // made by previewgate at all
	// Record names the sandbox's record that outlives its container (a
	// Kubernetes ConfigMap), which removing the container alone leaves in the
	// id's way; "" when none or records are kept per scope.
	Record string
}

func (e *ForeignError) Error() string {
	if !e.Managed {
		return fmt.Sprintf("container %s: %v: %s; remove or rename it if nobody needs it", e.Container, runtime.ErrForeign, e.Why)
	}
	return fmt.Sprintf("container %s: %v: %s; serve it from a gateway of that scope, or remove %s if nobody needs it",
		e.Container, runtime.ErrForeign, e.Why, e.Removable())
}

// Removable names what an operator removes to free the id: the container,
// and its record if it has one.
func (e *ForeignError) Removable() string {
	if e.Record == "" {
		return "the container " + e.Container
	}
	return "the container " + e.Container + " and its record (the ConfigMap " + e.Record + ")"
}

func (e *ForeignError) Unwrap() error { return runtime.ErrForeign }

// owns returns nil if this manager owns c, else a *ForeignError saying
// whose it is and what to do about it.
func (m *Manager) owns(c runtime.Instance) error {
	why := m.foreign(c.Labels)
	if why == "" {
		return nil
	}
	fe := &ForeignError{Container: c.Name, Why: why, Managed: c.Labels[runtime.LabelManaged] == "true"}
	// Only a container previewgate made has an owning gateway; this
	// gateway's own scope label names no other scope.
	if inst := c.Labels[runtime.LabelInstance]; fe.Managed && inst != m.cfg.Labels[runtime.LabelInstance] {
		fe.Scope = inst
	}
	if id := c.Labels[runtime.LabelSandbox]; fe.Managed && config.ValidID(id) && m.cfg.RecordName != nil {
		fe.Record = m.cfg.RecordName(id)
	}
	return fe
}

// foreign says why a container with labels l is not this manager's ("" if
// it is). Label values are named only for the instance label (a scope's
// name): other labels may hold an operator's values.
func (m *Manager) foreign(l map[string]string) string {
	if l[runtime.LabelManaged] != "true" {
		return "it was not made by previewgate (no " + runtime.LabelManaged + "=true label)"
	}
	owner := "another gateway's scope"
	switch inst := l[runtime.LabelInstance]; {
	case inst != "" && inst == m.cfg.Labels[runtime.LabelInstance]:
		owner = fmt.Sprintf("another gateway of the scope %q with other labels (--label)", inst)
	case inst != "":
		owner = fmt.Sprintf("the gateway scope %q (config scope: %s, or --label %s=%s)", inst, inst, runtime.LabelInstance, inst)
	}
	stamp, stamped := l[runtime.LabelScope]
	if stamped && stamp != m.stamp || !stamped && len(m.cfg.Labels) == 0 && l[runtime.LabelInstance] != "" {
		return "it belongs to " + owner
	}
	var missing []string
	for k, v := range m.cfg.Labels {
		if got, ok := l[k]; !ok || got != v {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	slices.Sort(missing)
	return fmt.Sprintf("it belongs to %s (it lacks this gateway's label %s)", owner, strings.Join(missing, ", "))
}

// name is the name of sandbox id's instance when this manager makes it
// (runtime.Name: no other scope's sandbox of id has it).
func (m *Manager) name(id string) string { return runtime.Name(m.stamp, id) }

// findID looks sandbox id's instance up under its name, else under its
// runtime.LegacyName (one this scope made there is adopted as it is). What
// holds the legacy name and is not owned is none of its business:
// runtime.ErrNotFound then. Errors are inspectOwned's.
func (m *Manager) findID(ctx context.Context, id string) (runtime.Instance, error) {
	c, err := m.inspectOwned(ctx, m.name(id))
	if !errors.Is(err, runtime.ErrNotFound) {
		return c, err
	}
	if lc, lerr := m.inspectOwned(ctx, runtime.LegacyName(id)); lerr == nil {
		return lc, nil
	}
	return c, err
}

// inspectOwned looks name (or an ID) up and checks this manager owns it:
// runtime.ErrNotFound if missing, runtime.ErrForeign if it is not.
func (m *Manager) inspectOwned(ctx context.Context, name string) (runtime.Instance, error) {
	c, err := m.rt.Lookup(ctx, name)
	if err != nil {
		return runtime.Instance{}, err
	}
	if c.Name == "" {
		c.Name = name
	}
	if err := m.owns(c); err != nil {
		return runtime.Instance{}, err
	}
	// A sandbox's name must find that sandbox's container: "pool-<t>-<hex>" is
	// a valid id naming a pool container, or a pod a sandbox claimed (attack21).
	if id, ok := runtime.SandboxOf(name); ok && config.ValidID(id) {
		n := strings.TrimPrefix(c.Name, "/")
		if pool := c.Labels[runtime.LabelPool]; n != name || pool != "" && strings.HasPrefix(n, poolPrefix(pool)) {
			return runtime.Instance{}, &ForeignError{Container: name, Managed: true,
				Why: "it is a warm pool container or another sandbox's, never sandbox " + id + "'s; use another id"}
		}
	}
	return c, nil
}

// listOwned lists the instances this manager owns (owns also guards against
// a runtime that ignored the label filter).
func (m *Manager) listOwned(ctx context.Context) ([]runtime.Instance, error) {
	list, err := m.rt.List(ctx, m.scopeLabels())
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(c runtime.Instance) bool { return m.owns(c) != nil }), nil
}

// disown forgets sandbox id after its name was found on a container it does
// not own.
func (m *Manager) disown(id string) {
	var gone string
	m.mu.Lock()
	if sb := m.sandboxes[id]; sb != nil {
		gone = m.dropLocked(sb)
		sb.last = nil
		sb.state = ""
		sb.container = ""
	}
	m.mu.Unlock()
	m.gone(gone)
}
