package sandboxmgr

import (
	"net"
	"strconv"
	"strings"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Container instances (#13). An Endpoint names the run behind its address:
// "<container ID>@<start time, unix ns>". A runtime gives a stopped
// container's address to the next one it starts, and a restart may keep it,
// so the gateway binds its upstream connections to the instance instead.
//
// Invariant: every instance handed out in an Endpoint is either its
// sandbox's recorded one (sandbox.last) or has been reported to
// Listener.InstanceGone: by an event that takes it down or renames it away,
// by Forget, Stop, Remove or the reaper, by a wake, Start or a resync that
// finds another run or none, or by a lookup finding a foreign container
// under the name. Reports may repeat, never go missing.
//
// Invariant (#21, #37): a request for sandbox A is never written to a
// connection whose peer is not A's current instance, even while the event
// stream is stalled. Handle.Confirm upholds it (confirm.go): no new
// connection carries a request before the runtime, read after it was made,
// names A's instance at its address. The cache is kept true besides, so
// confirmations rarely fail: an address belongs to at most one record (a
// wake that learns its container's address, claimAddrLocked, before the
// probe, drops every other record cached there), and what anyone else
// starts on such an address is caught by the re-check (recheck.go) at
// least every Config.RecheckEvery, whatever the stream looks like: a
// stalled stream looks exactly like a quiet one.

// instanceOf names one run of c; "" when its start time is unknown.
func instanceOf(c runtime.Instance) string {
	if c.ID == "" || c.StartedAt.IsZero() {
		return ""
	}
	return c.ID + "@" + strconv.FormatInt(c.StartedAt.UnixNano(), 10)
}

func instanceContainer(inst string) string {
	id, _, _ := strings.Cut(inst, "@")
	return id
}

// cacheLocked caches ep as sb's endpoint and last instance, and returns the
// instances this retires, to report with m.gone after unlocking. m.mu must
// be held for writing.
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

// claimAddrLocked makes addr's host sb's alone, dropping every other record
// cached on it; it returns the retired instances. m.mu must be held for
// writing.
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

// retireLocked drops sb's endpoint unless c is its run, forgetting the
// record when c is another run; it returns the retired instance. m.mu must
// be held for writing.
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
