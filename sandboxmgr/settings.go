package sandboxmgr

import (
	"context"
	"time"

	"github.com/previewgate/previewgate/records"
)

// Records is what the manager asks of the per-sandbox records (package
// records): settings as cached, and the removal marks by which a DELETE
// holds across replicas (tombstone.go). New's recs nil keeps none.
type Records interface {
	// Settings are id's settings as cached, and whether that copy may
	// grant access; no store call.
	Settings(id string) (records.Settings, bool)
	// Mark writes a DELETE's removal mark in place of id's settings.
	Mark(ctx context.Context, id string) error
	// ReadMark reads id's record fresh: its removal mark's ID, "" if none.
	ReadMark(ctx context.Context, id string) (string, error)
	// Clear drops id's settings and links (keeping a live mark); check,
	// if set, sees each read's mark first and may stop the clear.
	Clear(ctx context.Context, id string, check func(mark string) error) error
	// Reload reloads every record (start, re-check); DropOrphans then
	// removes those of sandboxes that no longer exist (keep false).
	Reload(ctx context.Context, began time.Time) (records.Listing, error)
	DropOrphans(ctx context.Context, l records.Listing, keep func(id string) bool)
}

var _ Records = (*records.Records)(nil)

// settingsOf fills in's view of settings s at now.
func (in *Info) settingsOf(s records.Settings, now time.Time) {
	in.PublicSetting = s.Public
	if s.KeepUpUntil.After(now) {
		in.KeepUpUntil = s.KeepUpUntil
	}
	in.LiveLinks = s.LiveLinks(now)
}

// keepUpUntil is sandbox id's keep-up time as cached (zero: none).
func (m *Manager) keepUpUntil(id string) time.Time {
	s, _ := m.recs.Settings(id)
	return s.KeepUpUntil
}
