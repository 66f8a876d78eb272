package sandboxmgr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Identity confirmation (#37). Events, the re-check and the rule that an
// address belongs to one record (instance.go) keep the cached endpoints
// true within a bound; a dial already decided is outside all of them: a
// container that stopped unseen (a stalled events stream) leaves its
// address to the next one the runtime starts, and a connection made to it
// reaches that one. So every new upstream connection is confirmed: once
// it is made, the runtime is read (Docker: inspect by container ID;
// Kubernetes: a GET of the pod from the API server, no informer) and must
// name the sandbox's instance, the same run, running, on the address
// dialed. A read begun after the connection was made that finds the
// instance running there says the peer was the instance when it accepted:
// a run keeps its address until it ends, and a connection ends with the
// network namespace it reached.
//
// Reused connections are not confirmed again: they belong to their
// instance (upstream invariant 1) and close when it is reported gone.

// confirmTimeout bounds one confirmation's runtime call.
const confirmTimeout = 5 * time.Second

// confirm is Handle.Confirm for sandbox id.
func (m *Manager) confirm(ctx context.Context, id, instance, addr string) error {
	host := addrHost(addr)
	if instance == "" || host == "" {
		return fmt.Errorf("confirm %s at %s: %w (no instance)", id, addr, ErrMoved)
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	c, err := m.rt.Lookup(ctx, instanceContainer(instance))
	switch {
	case errors.Is(err, runtime.ErrNotFound):
	case err != nil:
		return fmt.Errorf("confirm %s at %s: %w", id, addr, err)
	case m.serves(c, id, instance) && c.IP == host:
		return nil
	}
	m.dropInstance(id, instance)
	return fmt.Errorf("confirm %s at %s: %w (runtime: %s %q at %q)", id, addr, ErrMoved, instanceContainer(instance), c.State, c.IP)
}

// dropInstance drops id's cached endpoint if it is instance's, and reports
// instance gone (also when nothing was cached: a pooled connection of it
// may be in use).
func (m *Manager) dropInstance(id, instance string) {
	gone := instance
	m.mu.Lock()
	if sb := m.sandboxes[id]; sb != nil && sb.last != nil && sb.last.Instance == instance {
		gone = m.dropLocked(sb)
	}
	m.mu.Unlock()
	m.gone(gone)
}
