package admin

import (
	"time"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/traffic"
)

// The records of the manager and of the traffic log, mapped onto the
// API's types (package adminapi), which alone are encoded.

// sandboxOf is s as the API answers it at now, with this replica's
// traffic tr (nil: none).
func sandboxOf(s sandboxmgr.Info, tr *adminapi.Traffic, now time.Time) adminapi.Sandbox {
	out := adminapi.Sandbox{ID: s.ID, Template: s.Template, State: s.State, Container: s.Container,
		LastActivity: s.LastActivity, StartedAt: s.StartedAt, Metadata: s.Metadata,
		OpenSockets: s.OpenSockets, Wakes: s.Wakes, WakeSeconds: s.WakeSeconds,
		PublicSetting: s.PublicSetting, KeepUpUntil: s.KeepUpUntil, LiveLinks: s.LiveLinks, Traffic: tr}
	// The same fields, field for field: a change to either type's fields
	// stops the build here, where the API's answer is decided.
	if f := s.LastFailure; f != nil {
		out.LastFailure = (*adminapi.Failure)(f)
	}
	if w := s.Awake; w != nil {
		out.Awake = (*adminapi.Awake)(w)
	}
	if s.State == "running" && !s.StartedAt.IsZero() {
		out.UptimeSeconds = now.Sub(s.StartedAt).Round(time.Second).Seconds()
	}
	return out
}

// linkOf is a kept link as the API lists it: never its secret.
func linkOf(l links.Link) adminapi.Link {
	v := adminapi.Link{ID: l.ID, Port: l.Port, Path: l.Path, Created: l.Created, Expires: l.Expires}
	if !l.Revoked.IsZero() {
		t := l.Revoked
		v.Revoked = &t
	}
	return v
}

// requestsOf is the traffic log's requests as the API lists them; never
// nil (an empty list is [], not null).
func requestsOf(rs []traffic.Request) []adminapi.Request {
	out := make([]adminapi.Request, len(rs))
	for i, r := range rs {
		out[i] = adminapi.Request{Time: r.Time, Method: r.Method, Path: r.Path, Status: r.Status,
			Millis: r.Millis, BytesIn: r.BytesIn, BytesOut: r.BytesOut, Client: r.Client}
	}
	return out
}
