package sandboxmgr

import (
	"strconv"
	"strings"
)

// Container instances (#13). An Endpoint names the run of the container
// behind its address: "<container ID>@<start time, unix ns>". Docker gives a
// stopped container's address to the next container it starts, and a
// restarted container may keep its address, so an address alone says
// nothing about who answers; the gateway binds its pooled upstream
// connections to the instance instead.
//
// Invariant: every instance the manager has handed out (in an Endpoint) is
// either the one recorded for its sandbox (sandbox.last) or has been
// reported to Listener.InstanceGone. It is reported when:
//   - an event says the container died, stopped, was killed, OOM-killed,
//     paused, destroyed or renamed away;
//   - Forget, Stop or Remove drops it, or the reaper stops or pauses it;
//   - a wake, the reconciliation at Start or the resync after an events
//     reconnect finds another container, another run or no running one;
//   - a lookup finds a container under the sandbox's name that this
//     manager does not own.
// The record stays after a report, so a late event (a die after Forget)
// reports it again: reports may repeat, never go missing.

// instanceOf names one run of container c. "" when its start time is
// unknown (List does not report it).
func instanceOf(c ctrInfo) string {
	if c.ID == "" || c.StartedAt.IsZero() {
		return ""
	}
	return c.ID + "@" + strconv.FormatInt(c.StartedAt.UnixNano(), 10)
}

// instanceContainer is the container ID of instance inst.
func instanceContainer(inst string) string {
	id, _, _ := strings.Cut(inst, "@")
	return id
}

// cacheLocked makes ep id's cached endpoint and records it as the sandbox's
// last instance. It returns the instance this retires, if any, for the
// caller to report (after unlocking) with m.gone. m.mu must be held for
// writing.
func (m *Manager) cacheLocked(sb *sandbox, ep *Endpoint) (gone string) {
	if sb.last != nil && sb.last.Instance != ep.Instance {
		gone = sb.last.Instance
	}
	sb.last = ep
	sb.ep.Store(ep)
	return gone
}

// dropLocked drops sb's cached endpoint and returns its last instance, to
// report with m.gone. The record stays. m.mu must be held for writing.
func (m *Manager) dropLocked(sb *sandbox) (gone string) {
	sb.ep.Store(nil)
	if sb.last != nil {
		return sb.last.Instance
	}
	return ""
}

// retireLocked drops sb's cached endpoint unless c is the run it points at,
// and forgets the record when c is another run. It returns the retired
// instance to report. m.mu must be held for writing.
func (m *Manager) retireLocked(sb *sandbox, c ctrInfo) (gone string) {
	if sb.last == nil {
		return ""
	}
	inst := instanceOf(c)
	if inst == sb.last.Instance && c.State == stateRunning {
		return ""
	}
	gone = m.dropLocked(sb)
	if inst != "" && inst != gone || c.ID != "" && c.ID != instanceContainer(gone) {
		sb.last = nil // another run or container: the old one can never come back
	}
	return gone
}
