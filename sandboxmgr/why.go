package sandboxmgr

import (
	"fmt"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Why a sandbox is awake (#23), from the plan the reaper itself acts on
// (planLocked), so the answer cannot drift from what happens.

// Awake explains a running sandbox's plan as this replica sees it.
type Awake struct {
	// Reasons, in words, each a fact.
	Reasons []string
	// Summary is the main reason in a few words, for tables.
	Summary     string
	OpenSockets int
	// LastActivity is the latest activity this replica knows of, its own
	// or (SharedActivity) another replica's.
	LastActivity time.Time
	// SharedActivity is the latest the runtime's shared signal reported
	// when the reaper last asked; zero if none.
	SharedActivity time.Time
	// KeepUntil is a per-sandbox keep-up time (#23 settings); zero: none.
	KeepUntil time.Time
	// IdleFrom is when idleness counts from; Rule the setting that applies
	// (idle_timeout, max_socket_idle), LimitSeconds its value.
	IdleFrom     time.Time
	Rule         string
	LimitSeconds float64
	// StopsAt is the earliest the reaper acts, with Action "stop" or
	// "pause", unless a request (or another replica's traffic) comes first.
	StopsAt time.Time
	Action  string
}

// awake explains sb if it is running; nil otherwise.
func (m *Manager) awake(sb *sandbox) *Awake {
	m.mu.RLock()
	running, tplName, started := sb.state == runtime.StateRunning, sb.template, sb.startedAt
	m.mu.RUnlock()
	if !running {
		return nil
	}
	now := m.now()
	a := &Awake{OpenSockets: int(sb.holds.Load()), LastActivity: sb.lastActive(), KeepUntil: m.keepUpUntil(sb.id)}
	if n := sb.sharedAt.Load(); n != 0 {
		a.SharedActivity = time.Unix(0, n)
	}
	tpl := m.cfg.Templates(tplName)
	if tpl == nil {
		a.Reasons = []string{fmt.Sprintf("its template %q is no longer configured: the idle reaper leaves it alone", tplName)}
		return a
	}
	tpl = withReapDefaults(tpl)
	m.mu.RLock()
	p := m.planLocked(sb, tpl)
	m.mu.RUnlock()
	a.IdleFrom, a.LimitSeconds, a.StopsAt = p.from, p.limit.Seconds(), p.at
	a.Rule, a.Action = "idle_timeout", "stop"
	if tpl.IdleAction == config.IdlePause {
		a.Action = "pause"
	}
	if p.act == reapSockets {
		a.Rule, a.Action = "max_socket_idle", "stop"
		a.Summary = fmt.Sprintf("%d open socket(s)", a.OpenSockets)
		a.Reasons = append(a.Reasons, fmt.Sprintf("%d open WebSocket or SSE connection(s): kept up until %s after the last request (max_socket_idle)", a.OpenSockets, p.limit))
	}
	ago := func(t time.Time) string { return now.Sub(t).Round(time.Second).String() + " ago" }
	switch {
	case !a.SharedActivity.IsZero() && !a.SharedActivity.Before(a.LastActivity) && a.SharedActivity.Equal(p.from):
		a.summarize("another replica's traffic")
		a.Reasons = append(a.Reasons, "traffic through another replica "+ago(a.SharedActivity)+" (the runtime's shared activity)")
	case !a.LastActivity.IsZero() && a.LastActivity.Equal(p.from):
		a.summarize("recent request")
		a.Reasons = append(a.Reasons, "last request "+ago(a.LastActivity))
	case !started.IsZero() && started.Equal(p.from):
		a.summarize("just started")
		a.Reasons = append(a.Reasons, "started "+ago(started)+", no request since")
	default:
		a.summarize("gateway restart")
		a.Reasons = append(a.Reasons, "this gateway started "+ago(p.from)+" and saw no request since (earlier activity is unknown to it)")
	}
	if a.KeepUntil.After(now) && a.KeepUntil.Equal(p.at) {
		a.Summary = "kept up"
		a.Reasons = append(a.Reasons, "kept up until "+a.KeepUntil.UTC().Format(time.RFC3339)+" by its settings (keep_up)")
	} else if !a.KeepUntil.After(now) {
		a.KeepUntil = time.Time{}
	}
	if _, ok := m.shared(); ok {
		a.Reasons = append(a.Reasons, "before it stops, the runtime is asked for other replicas' traffic")
	}
	return a
}

// summarize sets Summary to s unless open sockets already explain it.
func (a *Awake) summarize(s string) {
	if a.Summary == "" {
		a.Summary = s
	}
}
