package sandboxmgr

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// The manager's scope (#13). A manager owns only the containers that carry
// every scope label: previewgate.managed=true plus Config.Labels (the
// gateway's --label, and in the development default a per-data-dir
// instance label). A container named previewgate-<id> without them belongs
// to someone else, another gateway or a user: it is never started,
// unpaused, paused, stopped, removed, renamed, listed, reaped, adopted or
// proxied to, and Ensure on its name fails with ErrForeignContainer. The
// name collision is reported, never "fixed" by removing the container.
//
// Checking labels and then acting by name would race with the name being
// taken by another container in between, so every call that changes a
// container takes the ID of one whose labels were checked (labels are
// immutable) or that this manager created.

// scopeLabels selects the containers this manager owns.
func (m *Manager) scopeLabels() map[string]string {
	l := make(map[string]string, len(m.cfg.Labels)+1)
	for k, v := range m.cfg.Labels {
		l[k] = v
	}
	l[LabelManaged] = "true"
	return l
}

// owns returns nil if c carries every scope label, else ErrForeignContainer
// naming the labels it lacks (keys only: values may be an operator's).
func (m *Manager) owns(c ctrInfo) error {
	var missing []string
	for k, v := range m.scopeLabels() {
		if got, ok := c.Labels[k]; !ok || got != v {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("container %s: %w (it lacks this gateway's label %s)", c.Name, ErrForeignContainer, strings.Join(missing, ", "))
}

// inspectOwned inspects container name (or ID) and checks that this
// manager owns it: ErrNoContainer if missing, ErrForeignContainer if it is
// someone else's.
func (m *Manager) inspectOwned(ctx context.Context, name string) (ctrInfo, error) {
	c, err := m.eng.Inspect(ctx, name)
	if err != nil {
		return ctrInfo{}, err
	}
	if c.Name == "" {
		c.Name = name
	}
	if err := m.owns(c); err != nil {
		return ctrInfo{}, err
	}
	return c, nil
}

// listOwned lists the containers this manager owns. The engine already
// filters by label; checking again keeps an engine that ignored a filter
// from widening the scope.
func (m *Manager) listOwned(ctx context.Context) ([]ctrInfo, error) {
	list, err := m.eng.List(ctx, m.scopeLabels())
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(c ctrInfo) bool { return m.owns(c) != nil }), nil
}

// disown forgets what the manager knew about sandbox id after its name was
// found on a container it does not own: whatever it cached before is not
// behind that name any more.
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
