package sandboxmgr

import (
	"net"
	"strconv"
	"strings"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
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
//
// Invariant (#21): a request for sandbox A is never written to a
// connection whose peer is not A's current instance, also while the
// runtime's event stream is stalled, broken or lagging. An address belongs
// to at most one record: when a wake learns the address of its running
// container (claimAddrLocked, before it probes the app) every other record
// cached on that address is dropped and its instance reported gone, so a
// container that died unseen cannot pass its users to the sandbox that
// inherits its address through this manager. What another replica or
// anyone else starts on such an address is caught by the re-check
// (recheck.go), which compares every cached endpoint with the runtime's own
// list at least every Config.RecheckEvery, whether the event stream looks
// healthy or not: a stalled stream looks exactly like a quiet one.

// instanceOf names one run of container c. "" when its start time is
// unknown (List does not report it).
func instanceOf(c runtime.Instance) string {
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
func (m *Manager) cacheLocked(sb *sandbox, ep *Endpoint) (gone []string) {
	if sb.last != nil && sb.last.Instance != ep.Instance {
		gone = append(gone, sb.last.Instance)
	}
	gone = append(gone, m.claimAddrLocked(sb, ep.Addr)...)
	m.seenLocked(sb)
	sb.last = ep
	sb.ep.Store(ep)
	return gone
}

// claimAddrLocked makes addr's host sb's alone: every other record cached
// on it is dropped, its last instance forgotten, and the instances retired
// are returned for the caller to report. m.mu must be held for writing.
func (m *Manager) claimAddrLocked(sb *sandbox, addr string) (gone []string) {
	host := addrHost(addr)
	if host == "" {
		return nil
	}
	if other := m.addrs[host]; other != nil && other != sb {
		if ep := other.ep.Load(); ep != nil && addrHost(ep.Addr) == host {
			gone = append(gone, m.dropLocked(other))
			other.last = nil // that instance no longer has this address
			m.log.Warn("address passed to another sandbox: dropped the old record",
				"addr", host, "sandbox", sb.id, "dropped", other.id)
		}
	}
	m.addrs[host] = sb
	return gone
}

// seenLocked marks sb as updated from something newer than any list
// already begun (recheck). m.mu must be held for writing.
func (m *Manager) seenLocked(sb *sandbox) {
	m.gen++
	sb.seen = m.gen
}

// addrHost is the host part of "ip:port" ("" if malformed).
func addrHost(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return h
}

// dropLocked drops sb's cached endpoint and returns its last instance, to
// report with m.gone. The record stays. m.mu must be held for writing.
func (m *Manager) dropLocked(sb *sandbox) (gone string) {
	if ep := sb.ep.Load(); ep != nil {
		if h := addrHost(ep.Addr); m.addrs[h] == sb {
			delete(m.addrs, h)
		}
	}
	sb.ep.Store(nil)
	if sb.last != nil {
		return sb.last.Instance
	}
	return ""
}

// retireLocked drops sb's cached endpoint unless c is the run it points at,
// and forgets the record when c is another run. It returns the retired
// instance to report. m.mu must be held for writing.
func (m *Manager) retireLocked(sb *sandbox, c runtime.Instance) (gone string) {
	if sb.last == nil {
		return ""
	}
	inst := instanceOf(c)
	if inst == sb.last.Instance && c.State == runtime.StateRunning {
		return ""
	}
	gone = m.dropLocked(sb)
	if inst != "" && inst != gone || c.ID != "" && c.ID != instanceContainer(gone) {
		sb.last = nil // another run or container: the old one can never come back
	}
	return gone
}
